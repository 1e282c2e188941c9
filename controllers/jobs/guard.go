package jobs

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// The validating webhooks of every kind share these rules: they are what
// keeps a tenant from running pods outside quota by editing a queued job
// (see docs/jobs.md, "What berth refuses").

// QueueNamePath is the field path of the queue-name label, for errors.
var QueueNamePath = field.NewPath("metadata", "labels").Key(berthv1.QueueNameLabel)

// ValidateQueueName checks that the queue-name label, when present, can
// name a LocalQueue: a LocalQueue is an object of the job's own namespace,
// so its name is a DNS subdomain and there is no namespace part.
func ValidateQueueName(labels map[string]string) field.ErrorList {
	v, ok := labels[berthv1.QueueNameLabel]
	if !ok {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		msg := "must be the name of a LocalQueue in the job's own namespace (lowercase letters, digits, '-' and '.', " +
			"starting and ending with a letter or digit; a job cannot use another namespace's queue)"
		return field.ErrorList{field.Invalid(QueueNamePath, v, msg)}
	}
	return nil
}

// ValidateQueueNameUpdate refuses changing or removing the queue-name label
// while berth holds a Workload for the job that is not finished: the
// Workload's queue cannot change, and a job without the label is no longer
// berth's, so its pods would run on quota nobody accounts for.
func ValidateQueueNameUpdate(oldLabels, newLabels map[string]string, wl *berthv1.Workload) field.ErrorList {
	oldQ, hadQ := oldLabels[berthv1.QueueNameLabel]
	newQ, hasQ := newLabels[berthv1.QueueNameLabel]
	if !hadQ || (hasQ && oldQ == newQ) || wl == nil || lifecycle.IsFinished(wl) {
		return nil
	}
	what := "changed"
	if !hasQ {
		what = "removed"
	}
	return field.ErrorList{field.Forbidden(QueueNamePath, fmt.Sprintf(
		"cannot be %s while berth holds workload %s for this job in queue %q: delete the job and create it again with the new label",
		what, wl.Name, oldQ))}
}

// ValidateResume refuses a change of a held job from suspended to running
// unless its Workload is admitted: berth itself resumes the job then. A
// GitOps tool that re-applies suspend: false is refused too, with a message
// that says to leave the field to berth.
func ValidateResume(wasSuspended, suspended bool, wl *berthv1.Workload, path *field.Path) field.ErrorList {
	if !wasSuspended || suspended || (wl != nil && lifecycle.MayRun(lifecycle.PhaseOf(wl))) {
		return nil
	}
	name := "(not created yet)"
	if wl != nil {
		name = wl.Name
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"berth holds this job until its workload %s is admitted, and then sets suspend to false itself: "+
			"leave suspend true (remove it from the manifest you apply)", name))}
}

// Workloads reads the Workloads webhooks decide on: from the manager's
// cache first, and from the API server when the cached answer would refuse
// the request (the cache may lag behind an admission berth just wrote).
type Workloads struct {
	// Cache is the manager's cached reader.
	Cache client.Reader
	// API reads from the API server.
	API client.Reader
}

// Get returns the named Workload, nil when it does not exist. fresh says
// whether a cached answer is good enough: when it returns false, the
// Workload is read again from the API server.
func (w Workloads) Get(ctx context.Context, namespace, name string, fresh func(*berthv1.Workload) bool) (*berthv1.Workload, error) {
	var out *berthv1.Workload
	for _, r := range []client.Reader{w.Cache, w.API} {
		wl := &berthv1.Workload{}
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, wl)
		switch {
		case apierrors.IsNotFound(err):
			out = nil
		case err != nil:
			return nil, fmt.Errorf("reading workload %s/%s: %w", namespace, name, err)
		default:
			out = wl
		}
		if fresh(out) {
			return out, nil
		}
	}
	return out, nil
}

// Admitted is a fresh func for Workloads.Get: an admitted Workload.
func Admitted(wl *berthv1.Workload) bool { return wl != nil && lifecycle.MayRun(lifecycle.PhaseOf(wl)) }

// Absent is a fresh func for Workloads.Get: no Workload, or a finished one.
func Absent(wl *berthv1.Workload) bool { return wl == nil || lifecycle.IsFinished(wl) }

// Refusal turns field errors into the API error a webhook returns.
func Refusal(kind schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(kind, name, errs)
}

// ParentOf returns the object of one of kinds that controls obj and that
// berth queues (a JobSet controlling one of its Jobs), and its kind; nil
// when there is none. A controller reference that names no such object —
// it does not exist, has another UID, or carries no queue-name label — is
// not a parent, nor is one whose kind says obj is not among the children
// its controller makes (see ChildVerifier): a forged reference does not
// take a job out of quota.
//
// A parent that is itself the child of a queued parent (the JobSet a
// TrainJob makes) is covered by that one's Workload, not its own: ParentOf
// returns the outermost such ancestor, so the Job of a TrainJob's JobSet
// (and its pods) count against the TrainJob's Workload.
func ParentOf(ctx context.Context, c client.Reader, obj client.Object, kinds []Kind) (client.Object, Kind, error) {
	return parentOf(ctx, c, obj, kinds, maxParentDepth)
}

// ParentOf is ParentOf read through the cache, and again from the API
// server when the cache finds no parent for an object that names a
// controller: an operator creates a child right after it saw its parent,
// which berth's cache may not hold yet, and a child taken for a job of its
// own would be held, and charged, twice.
func (w Workloads) ParentOf(ctx context.Context, obj client.Object, kinds []Kind) (client.Object, Kind, error) {
	parent, kind, err := ParentOf(ctx, w.Cache, obj, kinds)
	if err != nil || parent != nil || metav1.GetControllerOf(obj) == nil {
		return parent, kind, err
	}
	return ParentOf(ctx, w.API, obj, kinds)
}

// maxParentDepth bounds how far up ParentOf follows controller references:
// a Job of a TrainJob's JobSet is the deepest child berth knows (two
// levels), and the bound ends a cycle of forged references.
const maxParentDepth = 3

// parentOf is ParentOf following at most depth controller references.
func parentOf(ctx context.Context, c client.Reader, obj client.Object, kinds []Kind, depth int) (client.Object, Kind, error) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || depth == 0 {
		return nil, nil, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, nil, nil
	}
	for _, k := range kinds {
		if k.GVK().GroupKind() != (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) {
			continue
		}
		parent := k.NewObject()
		err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, parent)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			return nil, nil, nil
		case err != nil:
			return nil, nil, fmt.Errorf("reading %s %s, controller of %s: %w", ref.Kind, ref.Name, obj.GetName(), err)
		}
		if _, queued := parent.GetLabels()[berthv1.QueueNameLabel]; !queued || parent.GetUID() != ref.UID {
			return nil, nil, nil
		}
		if v, ok := k.(ChildVerifier); ok && !v.IsChild(parent, obj) {
			return nil, nil, nil
		}
		if outer, outerKind, err := parentOf(ctx, c, parent, kinds, depth-1); err != nil || outer != nil {
			return outer, outerKind, err
		}
		return parent, k, nil
	}
	return nil, nil, nil
}

// Held returns a Workload controlled by the object of uid that is not
// finished (a LeaderWorkerSet has one per replica), nil when there is none.
func (w Workloads) Held(ctx context.Context, namespace string, uid types.UID) (*berthv1.Workload, error) {
	for _, r := range []client.Reader{w.Cache, w.API} {
		wls := &berthv1.WorkloadList{}
		if err := r.List(ctx, wls, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing workloads in %s: %w", namespace, err)
		}
		for i := range wls.Items {
			if ref := metav1.GetControllerOf(&wls.Items[i]); ref != nil && ref.UID == uid && !lifecycle.IsFinished(&wls.Items[i]) {
				return &wls.Items[i], nil
			}
		}
	}
	return nil, nil
}
