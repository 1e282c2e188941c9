package rayjob

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// +kubebuilder:webhook:path=/validate-ray-io-v1-rayjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=ray.io,resources=rayjobs,verbs=create;update,versions=v1,name=vrayjob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`

// Validator refuses a queued RayJob berth cannot hold within quota, and the
// edits of one that would run its pods outside quota, as
// batchjob.Validator does for Jobs.
type Validator struct {
	// Workloads reads the RayJobs' Workloads.
	Workloads jobs.Workloads
}

var _ admission.Validator[*rayv1.RayJob] = Validator{}

var (
	suspendPath = field.NewPath("spec", "suspend")
	specPath    = field.NewPath("spec")
)

// ValidateCreate checks the queue name and that berth can queue the RayJob.
func (Validator) ValidateCreate(_ context.Context, rj *rayv1.RayJob) (admission.Warnings, error) {
	errs := append(jobs.ValidateQueueName(rj.Labels), shapeErrors(rj)...)
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), rj.Name, errs)
}

// ValidateUpdate checks the queue name, its changes, the RayJob's shape
// while it is queued, and resuming.
func (v Validator) ValidateUpdate(ctx context.Context, old, rj *rayv1.RayJob) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(rj.Labels)
	name := jobs.WorkloadName(Kind{}.GVK().Kind, rj)
	wl, err := v.Workloads.Get(ctx, rj.Namespace, name, jobs.Absent)
	if err != nil {
		return nil, err
	}
	errs = append(errs, jobs.ValidateQueueNameUpdate(old.Labels, rj.Labels, wl)...)
	if _, queued := rj.Labels[berthv1.QueueNameLabel]; queued {
		errs = append(errs, shapeErrors(rj)...)
		// KubeRay does not apply a changed cluster spec to the cluster of
		// a running RayJob, while berth charges the RayJob by it: a
		// running RayJob cut to one worker would keep all it has on the
		// quota of one.
		if !old.Spec.Suspend && !equality.Semantic.DeepEqual(old.Spec.RayClusterSpec, rj.Spec.RayClusterSpec) {
			errs = append(errs, field.Forbidden(specPath.Child("rayClusterSpec"),
				"a running RayJob's cluster spec cannot change: KubeRay keeps the cluster it made, and berth charges the RayJob by this spec; suspend the RayJob, change it, and let berth admit it again"))
		}
	}
	if old.Spec.Suspend && !rj.Spec.Suspend {
		if wl, err = v.Workloads.Get(ctx, rj.Namespace, name, jobs.Admitted); err != nil {
			return nil, err
		}
		errs = append(errs, jobs.ValidateResume(true, false, wl, suspendPath)...)
	}
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), rj.Name, errs)
}

// ValidateDelete allows every deletion.
func (Validator) ValidateDelete(context.Context, *rayv1.RayJob) (admission.Warnings, error) {
	return nil, nil
}

// shapeErrors are the reasons berth cannot queue the RayJob as it is.
func shapeErrors(rj *rayv1.RayJob) field.ErrorList {
	if _, err := (&RayJob{rj}).PodSets(); err != nil {
		return field.ErrorList{field.Invalid(specPath, field.OmitValueType{}, err.Error())}
	}
	return nil
}
