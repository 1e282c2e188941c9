package trainjob

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// +kubebuilder:webhook:path=/mutate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create,versions=v1alpha1,name=mtrainjob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=vtrainjob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`

// Defaulter holds every TrainJob submitted to a berth queue: it sets
// spec.suspend on creation, so that the trainer runs no pod before
// admission, and gives it berth's runtime patch, which labels its JobSet
// with its queue. An entry of berth's manager the TrainJob arrives with
// is not berth's: it is replaced by one without placement.
type Defaulter struct{}

var _ admission.Defaulter[*trainer.TrainJob] = Defaulter{}

// Default holds a TrainJob that carries the queue-name label.
func (Defaulter) Default(_ context.Context, tj *trainer.TrainJob) error {
	if _, ok := tj.Labels[berthv1.QueueNameLabel]; !ok {
		return nil
	}
	tj.Spec.Suspend = ptr.To(true)
	tj.Spec.RuntimePatches = slices.DeleteFunc(tj.Spec.RuntimePatches, func(p trainer.RuntimePatch) bool { return p.Manager == Manager })
	ownPatch(tj)
	return nil
}

// Validator refuses a queued TrainJob berth cannot hold within quota, and
// the edits of one that would run its pods outside quota, as
// batchjob.Validator does for Jobs: an invalid queue name, moving it out of
// its queue while berth holds its Workload, resuming it before admission,
// and taking its JobSet out of berth's sight (berth's runtime patch).
type Validator struct {
	// Workloads reads the TrainJobs' Workloads; its readers also read the
	// training runtimes.
	Workloads jobs.Workloads
}

var _ admission.Validator[*trainer.TrainJob] = Validator{}

var (
	suspendPath = field.NewPath("spec", "suspend")
	specPath    = field.NewPath("spec")
	patchesPath = field.NewPath("spec", "runtimePatches")
)

// ValidateCreate checks the queue name and that berth can queue the
// TrainJob: its runtime exists and gives a gang berth can admit.
func (v Validator) ValidateCreate(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(tj.Labels)
	shape, err := v.shapeErrors(ctx, tj)
	if err != nil {
		return nil, err
	}
	errs = append(errs, shape...)
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), tj.Name, errs)
}

// ValidateUpdate checks the queue name, its changes, berth's runtime
// patch, resuming, and the shape a held TrainJob's patches give it. An
// update that suspends the TrainJob is never refused for its shape: berth
// must be able to stop it whatever its runtime became.
func (v Validator) ValidateUpdate(ctx context.Context, old, tj *trainer.TrainJob) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(tj.Labels)
	name := jobs.WorkloadName(Kind{}.GVK().Kind, tj)
	wl, err := v.Workloads.Get(ctx, tj.Namespace, name, jobs.Absent)
	if err != nil {
		return nil, err
	}
	errs = append(errs, jobs.ValidateQueueNameUpdate(old.Labels, tj.Labels, wl)...)
	_, queued := tj.Labels[berthv1.QueueNameLabel]
	if queued && patchQueue(old) != "" && patchQueue(tj) == "" {
		errs = append(errs, field.Forbidden(patchesPath, fmt.Sprintf(
			"the entry of manager %s is berth's: it labels the TrainJob's JobSet with its queue, which is how berth keeps the JobSet within the TrainJob's admission; leave it", Manager)))
	}
	held := ptr.Deref(old.Spec.Suspend, false) && ptr.Deref(tj.Spec.Suspend, false)
	if queued && held && !equality.Semantic.DeepEqual(old.Spec.RuntimePatches, tj.Spec.RuntimePatches) {
		shape, err := v.shapeErrors(ctx, tj)
		if err != nil {
			return nil, err
		}
		errs = append(errs, shape...)
	}
	if ptr.Deref(old.Spec.Suspend, false) && !ptr.Deref(tj.Spec.Suspend, false) {
		if wl, err = v.Workloads.Get(ctx, tj.Namespace, name, jobs.Admitted); err != nil {
			return nil, err
		}
		errs = append(errs, jobs.ValidateResume(true, false, wl, suspendPath)...)
	}
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), tj.Name, errs)
}

// ValidateDelete allows every deletion.
func (Validator) ValidateDelete(context.Context, *trainer.TrainJob) (admission.Warnings, error) {
	return nil, nil
}

// shapeErrors are the reasons berth cannot queue tj as it is. The runtime
// is read from the cache, and again from the API server when the cache
// does not have it (it may have been created a moment ago).
func (v Validator) shapeErrors(ctx context.Context, tj *trainer.TrainJob) (field.ErrorList, error) {
	var why error
	for _, r := range []client.Reader{v.Workloads.Cache, v.Workloads.API} {
		j, err := load(ctx, r, tj)
		if err != nil {
			return nil, err
		}
		if _, why = j.PodSets(); why == nil {
			return nil, nil
		}
	}
	var invalid *jobs.InvalidError
	if !errors.As(why, &invalid) {
		return nil, why
	}
	return field.ErrorList{field.Invalid(specPath, field.OmitValueType{}, why.Error())}, nil
}
