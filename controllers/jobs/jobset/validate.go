package jobset

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// +kubebuilder:webhook:path=/validate-jobset-x-k8s-io-v1alpha2-jobset,mutating=false,failurePolicy=fail,sideEffects=None,groups=jobset.x-k8s.io,resources=jobsets,verbs=create;update,versions=v1alpha2,name=vjobset.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`

// Validator refuses the edits of a queued JobSet that would run its pods
// outside quota, as batchjob.Validator does for Jobs. A JobSet an operator
// makes for a queued parent (a TrainJob's) runs on the parent's Workload:
// it may run only while that Workload is admitted, and only within it — no
// more pods, no larger requests, no replicated job it does not cover —
// whoever creates or edits it.
type Validator struct {
	// Workloads reads the JobSets' (and their parents') Workloads.
	Workloads jobs.Workloads
	// Parents are the kinds whose children berth covers (a TrainJob).
	Parents []jobs.Kind
}

var _ admission.Validator[*jobsetv1.JobSet] = Validator{}

var (
	suspendPath = field.NewPath("spec", "suspend")
	rjsPath     = field.NewPath("spec", "replicatedJobs")
)

// ValidateCreate checks the queue name, and that a queued parent's JobSet
// created running fits its parent's admission.
func (v Validator) ValidateCreate(ctx context.Context, js *jobsetv1.JobSet) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(js.Labels)
	parent, child, err := v.parent(ctx, js)
	if err != nil {
		return nil, err
	}
	if child {
		childErrs, err := v.validateChild(ctx, parent, js)
		if err != nil {
			return nil, err
		}
		errs = append(errs, childErrs...)
	}
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), js.Name, errs)
}

// ValidateUpdate checks the queue name, its changes and resuming; or, for
// a queued parent's JobSet, that it runs only within its parent's
// admission.
func (v Validator) ValidateUpdate(ctx context.Context, old, js *jobsetv1.JobSet) (admission.Warnings, error) {
	// The relationship before the edit decides: a child's operator, or a
	// tenant, cannot take it out of its parent's admission by rewriting
	// its owner reference in the same update.
	parent, child, err := v.parent(ctx, old)
	if err != nil {
		return nil, err
	}
	if child {
		errs, err := v.validateChild(ctx, parent, js)
		if err != nil {
			return nil, err
		}
		return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), js.Name, append(jobs.ValidateQueueName(js.Labels), errs...))
	}
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

// parent returns the name of the Workload of the queued parent whose
// child js is (a TrainJob's), and whether it is one.
func (v Validator) parent(ctx context.Context, js *jobsetv1.JobSet) (string, bool, error) {
	parent, kind, err := v.Workloads.ParentOf(ctx, js, v.Parents)
	if err != nil || parent == nil {
		return "", false, err
	}
	return jobs.WorkloadName(kind.GVK().Kind, parent), true, nil
}

// validateChild refuses js, the JobSet of a queued parent whose Workload
// is named wlName, when it runs while that Workload is not admitted, or
// beyond it. A suspended JobSet runs nothing, so any change to it is
// allowed: the check comes when its operator resumes it.
func (v Validator) validateChild(ctx context.Context, wlName string, js *jobsetv1.JobSet) (field.ErrorList, error) {
	if ptr.Deref(js.Spec.Suspend, false) {
		return nil, nil
	}
	wl, err := v.Workloads.Get(ctx, js.Namespace, wlName, jobs.Admitted)
	if err != nil {
		return nil, err
	}
	owner := ownerName(js)
	if !jobs.Admitted(wl) {
		return field.ErrorList{field.Forbidden(suspendPath, fmt.Sprintf(
			"this JobSet is %s's, which berth holds until its workload %s is admitted: the JobSet runs only then, when its operator resumes it; leave suspend true",
			owner, wlName))}, nil
	}
	return growth(&JobSet{js}, wl, owner), nil
}

// ownerName names the controller of js for messages.
func ownerName(js *jobsetv1.JobSet) string {
	for _, ref := range js.OwnerReferences {
		if ptr.Deref(ref.Controller, false) {
			return fmt.Sprintf("%s %s", ref.Kind, ref.Name)
		}
	}
	return "its parent"
}

// growth refuses a replicated job of js that runs more pods, or pods that
// request more, than wl admitted for its pod set, or that wl does not
// cover at all.
func growth(js *JobSet, wl *berthv1.Workload, owner string) field.ErrorList {
	admitted := map[string]berthv1.PodSet{}
	for _, ps := range wl.Spec.PodSets {
		admitted[ps.Name] = ps
	}
	var errs field.ErrorList
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		path := rjsPath.Index(i)
		want, ok := admitted[rj.Name]
		n := int64(rj.Replicas) * int64(podsPerJob(&rj.Template.Spec))
		if !ok {
			errs = append(errs, field.Forbidden(path, fmt.Sprintf(
				"%s is admitted without replicated job %q (workload %s): a JobSet cannot run what its parent's admission does not cover", owner, rj.Name, wl.Name)))
			continue
		}
		if n > int64(want.Count) {
			errs = append(errs, field.Forbidden(path, fmt.Sprintf(
				"%s is admitted with %d pods in replicated job %q (workload %s), not %d: berth cannot admit a running gang's growth; delete %s and create it at the size it needs",
				owner, want.Count, rj.Name, wl.Name, n, owner)))
		}
		reqs := jobs.PodRequests(&rj.Template.Spec.Template.Spec)
		for _, res := range slices.Sorted(maps.Keys(reqs)) {
			q := reqs[res]
			if have, ok := want.Requests[res]; !ok || q.Cmp(have) > 0 {
				errs = append(errs, field.Forbidden(path, fmt.Sprintf(
					"%s is admitted with %s of %s per pod in replicated job %q (workload %s), not %s: berth cannot admit a running gang's growth",
					owner, quantity(want.Requests, res), res, rj.Name, wl.Name, q.String())))
			}
		}
	}
	return errs
}

// quantity is list[name] as text, "none" when list does not have it.
func quantity(list corev1.ResourceList, name corev1.ResourceName) string {
	if q, ok := list[name]; ok {
		return q.String()
	}
	return "none"
}
