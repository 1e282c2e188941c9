package raycluster

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// +kubebuilder:webhook:path=/mutate-ray-io-v1-raycluster,mutating=true,failurePolicy=fail,sideEffects=None,groups=ray.io,resources=rayclusters,verbs=create,versions=v1,name=mraycluster.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`
// +kubebuilder:webhook:path=/validate-ray-io-v1-raycluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=ray.io,resources=rayclusters,verbs=create;update,versions=v1,name=vraycluster.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`

// Defaulter holds every RayCluster submitted to a berth queue: it sets
// spec.suspend on creation, and starts an autoscaling cluster's groups at
// their minimum, the size berth admits. A cluster KubeRay makes for a
// queued RayJob carries the RayJob's labels but is left alone: the RayJob
// is what berth holds.
type Defaulter struct {
	// Readers read a cluster's parent: through the cache, then from the
	// API server when the cache finds none (KubeRay names the cluster in
	// the RayJob's status just before it creates it).
	Readers jobs.Workloads
	// Parents are the kinds whose children berth covers (a RayJob).
	Parents []jobs.Kind
}

// Default holds a queued RayCluster that is not a queued RayJob's.
func (d Defaulter) Default(ctx context.Context, rc *rayv1.RayCluster) error {
	if _, ok := rc.Labels[berthv1.QueueNameLabel]; !ok {
		return nil
	}
	parent, _, err := d.Readers.ParentOf(ctx, rc, d.Parents)
	if err != nil || parent != nil {
		return err
	}
	(&RayCluster{rc}).Suspend()
	StartAtMinimum(&rc.Spec)
	return nil
}

// Validator refuses a queued RayCluster berth cannot hold within quota, and
// the edits that would run its pods outside quota: an invalid queue name,
// moving it out of its queue, resuming it before admission, and growing it
// beyond its admission — an autoscaling cluster's groups are held at the
// admitted size, and a queued RayJob's cluster cannot outgrow the RayJob's
// admission.
type Validator struct {
	// Workloads reads the clusters' (and their parents') Workloads.
	Workloads jobs.Workloads
	// Parents are the kinds whose children berth covers (a RayJob).
	Parents []jobs.Kind
}

var _ admission.Validator[*rayv1.RayCluster] = Validator{}

var (
	suspendPath = field.NewPath("spec", "suspend")
	groupsPath  = field.NewPath("spec", "workerGroupSpecs")
)

// ValidateCreate checks the queue name and that berth can queue the cluster.
func (v Validator) ValidateCreate(ctx context.Context, rc *rayv1.RayCluster) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(rc.Labels)
	parent, _, err := v.Workloads.ParentOf(ctx, rc, v.Parents)
	if err != nil {
		return nil, err
	}
	if parent == nil {
		if _, err := (&RayCluster{rc}).PodSets(); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec"), field.OmitValueType{}, err.Error()))
		}
	}
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), rc.Name, errs)
}

// ValidateUpdate checks the queue name, its changes, resuming and growth.
func (v Validator) ValidateUpdate(ctx context.Context, old, rc *rayv1.RayCluster) (admission.Warnings, error) {
	gk := Kind{}.GVK().GroupKind()
	parent, kind, err := jobs.ParentOf(ctx, v.Workloads.Cache, old, v.Parents)
	if err != nil {
		return nil, err
	}
	if parent != nil {
		wl, err := v.Workloads.Get(ctx, rc.Namespace, jobs.WorkloadName(kind.GVK().Kind, parent), jobs.Admitted)
		if err != nil || !jobs.Admitted(wl) {
			return nil, err
		}
		what := fmt.Sprintf("the RayCluster of %s %s", kind.GVK().Kind, parent.GetName())
		c := &RayCluster{rc}
		return nil, jobs.Refusal(gk, rc.Name, growth(c, wl, what, c.autoscaling()))
	}
	errs := jobs.ValidateQueueName(rc.Labels)
	name := jobs.WorkloadName(Kind{}.GVK().Kind, rc)
	wl, err := v.Workloads.Get(ctx, rc.Namespace, name, jobs.Absent)
	if err != nil {
		return nil, err
	}
	errs = append(errs, jobs.ValidateQueueNameUpdate(old.Labels, rc.Labels, wl)...)
	if wl, err = v.Workloads.Get(ctx, rc.Namespace, name, jobs.Admitted); err != nil {
		return nil, err
	}
	c := &RayCluster{rc}
	if (&RayCluster{old}).IsSuspended() && !c.IsSuspended() {
		errs = append(errs, jobs.ValidateResume(true, false, wl, suspendPath)...)
	}
	if jobs.Admitted(wl) && !lifecycle.IsFinished(wl) {
		errs = append(errs, growth(c, wl, "the RayCluster", c.autoscaling())...)
	}
	return nil, jobs.Refusal(gk, rc.Name, errs)
}

// ValidateDelete allows every deletion.
func (Validator) ValidateDelete(context.Context, *rayv1.RayCluster) (admission.Warnings, error) {
	return nil, nil
}

// growth refuses a worker group of c that runs more pods than wl admitted
// for it (with exact, any other size too: an autoscaling cluster is held
// at its admitted size), or that wl does not cover.
func growth(c *RayCluster, wl *berthv1.Workload, what string, exact bool) field.ErrorList {
	admitted := map[string]int32{}
	for _, ps := range wl.Spec.PodSets {
		admitted[ps.Name] = ps.Count
	}
	var errs field.ErrorList
	for i := range c.Spec.WorkerGroupSpecs {
		g := &c.Spec.WorkerGroupSpecs[i]
		n := c.groupPods(g)
		if exact && ptr.Deref(g.Replicas, 0) != ptr.Deref(g.MinReplicas, 0) {
			n = DesiredWorkers(g)
		}
		want, ok := admitted[g.GroupName]
		switch {
		case n > 0 && !ok:
			errs = append(errs, field.Forbidden(groupsPath.Index(i), fmt.Sprintf(
				"%s is admitted without worker group %q (workload %s): a group cannot be added to a running cluster; delete and create it again", what, g.GroupName, wl.Name)))
		case n > int64(want) || (exact && n != int64(want)):
			errs = append(errs, field.Forbidden(groupsPath.Index(i), fmt.Sprintf(
				"%s is admitted with %d pods in worker group %q (workload %s), not %d: berth cannot admit a running cluster's growth, "+
					"so the group keeps its admitted size (the Ray autoscaler cannot grow it either); delete the cluster and create it at the size it needs",
				what, want, g.GroupName, wl.Name, n)))
		}
	}
	return errs
}
