package jobset

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/berth-dev/berth/controllers/jobs"
)

// +kubebuilder:webhook:path=/validate-jobset-x-k8s-io-v1alpha2-jobset,mutating=false,failurePolicy=fail,sideEffects=None,groups=jobset.x-k8s.io,resources=jobsets,verbs=create;update,versions=v1alpha2,name=vjobset.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`

// Validator refuses the edits of a queued JobSet that would run its pods
// outside quota, as batchjob.Validator does for Jobs.
type Validator struct {
	// Workloads reads the JobSets' Workloads.
	Workloads jobs.Workloads
}

var _ admission.Validator[*jobsetv1.JobSet] = Validator{}

var suspendPath = field.NewPath("spec", "suspend")

// ValidateCreate checks the queue name.
func (Validator) ValidateCreate(_ context.Context, js *jobsetv1.JobSet) (admission.Warnings, error) {
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), js.Name, jobs.ValidateQueueName(js.Labels))
}

// ValidateUpdate checks the queue name, its changes and resuming.
func (v Validator) ValidateUpdate(ctx context.Context, old, js *jobsetv1.JobSet) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(js.Labels)
	name := jobs.WorkloadName(Kind{}.GVK().Kind, js)
	wl, err := v.Workloads.Get(ctx, js.Namespace, name, jobs.Absent)
	if err != nil {
		return nil, err
	}
	errs = append(errs, jobs.ValidateQueueNameUpdate(old.Labels, js.Labels, wl)...)
	if ptr.Deref(old.Spec.Suspend, false) && !ptr.Deref(js.Spec.Suspend, false) {
		if wl, err = v.Workloads.Get(ctx, js.Namespace, name, jobs.Admitted); err != nil {
			return nil, err
		}
		errs = append(errs, jobs.ValidateResume(true, false, wl, suspendPath)...)
	}
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), js.Name, errs)
}

// ValidateDelete allows every deletion.
func (Validator) ValidateDelete(context.Context, *jobsetv1.JobSet) (admission.Warnings, error) {
	return nil, nil
}
