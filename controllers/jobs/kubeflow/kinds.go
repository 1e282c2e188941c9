package kubeflow

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/berth-dev/berth/controllers/jobs"
)

// PyTorchJobKind is the jobs.Kind of PyTorchJobs: pod sets "master" and
// "worker".
type PyTorchJobKind struct{}

var _ jobs.Kind = PyTorchJobKind{}

// GVK of kubeflow.org/v1 PyTorchJob.
func (PyTorchJobKind) GVK() schema.GroupVersionKind {
	return kftraining.GroupVersion.WithKind(kftraining.PyTorchJobKind)
}

// NewObject returns an empty PyTorchJob.
func (PyTorchJobKind) NewObject() client.Object { return &kftraining.PyTorchJob{} }

// Wrap returns the GenericJob of a PyTorchJob.
func (PyTorchJobKind) Wrap(obj client.Object) jobs.GenericJob {
	pj := obj.(*kftraining.PyTorchJob)
	return &Job{obj: pj, kind: kftraining.PyTorchJobKind, specs: pj.Spec.PyTorchReplicaSpecs, run: &pj.Spec.RunPolicy, status: &pj.Status,
		order: []kftraining.ReplicaType{kftraining.PyTorchJobReplicaTypeMaster, kftraining.PyTorchJobReplicaTypeWorker}}
}

// MPIJobKind is the jobs.Kind of the training-operator's MPIJobs
// (kubeflow.org/v1): pod sets "launcher" and "worker".
type MPIJobKind struct{}

var _ jobs.Kind = MPIJobKind{}

// GVK of kubeflow.org/v1 MPIJob.
func (MPIJobKind) GVK() schema.GroupVersionKind {
	return kftraining.GroupVersion.WithKind(kftraining.MPIJobKind)
}

// NewObject returns an empty MPIJob.
func (MPIJobKind) NewObject() client.Object { return &kftraining.MPIJob{} }

// Wrap returns the GenericJob of an MPIJob.
func (MPIJobKind) Wrap(obj client.Object) jobs.GenericJob {
	mj := obj.(*kftraining.MPIJob)
	return &Job{obj: mj, kind: kftraining.MPIJobKind, specs: mj.Spec.MPIReplicaSpecs, run: &mj.Spec.RunPolicy, status: &mj.Status,
		order: []kftraining.ReplicaType{kftraining.MPIJobReplicaTypeLauncher, kftraining.MPIJobReplicaTypeWorker}}
}

// +kubebuilder:webhook:path=/mutate-kubeflow-org-v1-pytorchjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=kubeflow.org,resources=pytorchjobs,verbs=create,versions=v1,name=mpytorchjob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`
// +kubebuilder:webhook:path=/validate-kubeflow-org-v1-pytorchjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=kubeflow.org,resources=pytorchjobs,verbs=create;update,versions=v1,name=vpytorchjob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`
// +kubebuilder:webhook:path=/mutate-kubeflow-org-v1-mpijob,mutating=true,failurePolicy=fail,sideEffects=None,groups=kubeflow.org,resources=mpijobs,verbs=create,versions=v1,name=mmpijob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`
// +kubebuilder:webhook:path=/validate-kubeflow-org-v1-mpijob,mutating=false,failurePolicy=fail,sideEffects=None,groups=kubeflow.org,resources=mpijobs,verbs=create;update,versions=v1,name=vmpijob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`

// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs;mpijobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs/finalizers;mpijobs/finalizers,verbs=update

// Validator refuses the edits of a queued training-operator job that would
// run its pods outside quota, as batchjob.Validator does for Jobs: an
// invalid queue name, moving it out of its queue while berth holds its
// Workload, and resuming it before admission.
type Validator[T client.Object] struct {
	// Kind wraps the job.
	Kind jobs.Kind
	// Workloads reads the jobs' Workloads.
	Workloads jobs.Workloads
}

var (
	_ admission.Validator[*kftraining.PyTorchJob] = Validator[*kftraining.PyTorchJob]{}
	_ admission.Validator[*kftraining.MPIJob]     = Validator[*kftraining.MPIJob]{}

	suspendPath = field.NewPath("spec", "runPolicy", "suspend")
)

// ValidateCreate checks the queue name.
func (v Validator[T]) ValidateCreate(_ context.Context, obj T) (admission.Warnings, error) {
	return nil, jobs.Refusal(v.Kind.GVK().GroupKind(), obj.GetName(), jobs.ValidateQueueName(obj.GetLabels()))
}

// ValidateUpdate checks the queue name, its changes and resuming.
func (v Validator[T]) ValidateUpdate(ctx context.Context, old, obj T) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(obj.GetLabels())
	name := jobs.WorkloadName(v.Kind.GVK().Kind, obj)
	wl, err := v.Workloads.Get(ctx, obj.GetNamespace(), name, jobs.Absent)
	if err != nil {
		return nil, err
	}
	errs = append(errs, jobs.ValidateQueueNameUpdate(old.GetLabels(), obj.GetLabels(), wl)...)
	if v.Kind.Wrap(old).IsSuspended() && !v.Kind.Wrap(obj).IsSuspended() {
		if wl, err = v.Workloads.Get(ctx, obj.GetNamespace(), name, jobs.Admitted); err != nil {
			return nil, err
		}
		errs = append(errs, jobs.ValidateResume(true, false, wl, suspendPath)...)
	}
	return nil, jobs.Refusal(v.Kind.GVK().GroupKind(), obj.GetName(), errs)
}

// ValidateDelete allows every deletion.
func (Validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}
