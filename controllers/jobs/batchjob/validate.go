package batchjob

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/berth-dev/berth/controllers/jobs"
)

// +kubebuilder:webhook:path=/validate-batch-v1-job,mutating=false,failurePolicy=fail,sideEffects=None,groups=batch,resources=jobs,verbs=create;update,versions=v1,name=vjob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`

// Validator refuses the edits of a queued Job that would run its pods
// outside quota: an invalid queue name, moving it out of its queue while
// berth holds its Workload, and unsuspending it before admission. On an
// update the API server calls it when the old or the new Job carries the
// queue-name label, so removing the label is seen too.
type Validator struct {
	// Workloads reads the Jobs' Workloads.
	Workloads jobs.Workloads
	// Parents are the kinds whose Jobs berth queues through their parent
	// (a JobSet's); such a Job runs when its parent's Workload is admitted.
	Parents []jobs.Kind
}

var _ admission.Validator[*batchv1.Job] = Validator{}

var suspendPath = field.NewPath("spec", "suspend")

// ValidateCreate checks the queue name.
func (Validator) ValidateCreate(_ context.Context, job *batchv1.Job) (admission.Warnings, error) {
	return nil, jobs.Refusal(batchv1.SchemeGroupVersion.WithKind("Job").GroupKind(), job.Name, jobs.ValidateQueueName(job.Labels))
}

// ValidateUpdate checks the queue name, its changes and resuming.
func (v Validator) ValidateUpdate(ctx context.Context, old, job *batchv1.Job) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(job.Labels)
	// A Job berth queues through its parent is resumed by the parent's
	// controller once the parent's Workload is admitted.
	var owner client.Object = job
	kind := "Job"
	parent, parentKind, err := jobs.ParentOf(ctx, v.Workloads.Cache, old, v.Parents)
	if err != nil {
		return nil, err
	}
	if parent != nil {
		owner, kind = parent, parentKind.GVK().Kind
	}
	name := jobs.WorkloadName(kind, owner)
	if parent == nil {
		wl, err := v.Workloads.Get(ctx, job.Namespace, name, jobs.Absent)
		if err != nil {
			return nil, err
		}
		errs = append(errs, jobs.ValidateQueueNameUpdate(old.Labels, job.Labels, wl)...)
	}
	if ptr.Deref(old.Spec.Suspend, false) && !ptr.Deref(job.Spec.Suspend, false) {
		wl, err := v.Workloads.Get(ctx, job.Namespace, name, jobs.Admitted)
		if err != nil {
			return nil, err
		}
		errs = append(errs, jobs.ValidateResume(true, false, wl, suspendPath)...)
	}
	return nil, jobs.Refusal(batchv1.SchemeGroupVersion.WithKind("Job").GroupKind(), job.Name, errs)
}

// ValidateDelete allows every deletion: the Workload goes with the Job.
func (Validator) ValidateDelete(context.Context, *batchv1.Job) (admission.Warnings, error) {
	return nil, nil
}
