package serving

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
)

// revisionAnnotation is the revision the Deployment controller writes on a
// Deployment and on each of its ReplicaSets; the new ReplicaSet's equals
// the Deployment's.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// EventSwapped is the reason of the event on a Deployment whose rolling
// update berth made room for.
const EventSwapped = "Swapped"

// Rollouts keeps rolling updates of queued Deployments from deadlocking at
// full quota. With maxUnavailable 0 the Deployment controller deletes an
// old pod only once a surge pod of the new ReplicaSet is Ready, and the
// surge pod, a gang of its own, gets no quota while the old replicas hold
// all of it. When a surge pod's Workload waits with InsufficientQuota (as
// the engine explains it),
// Rollouts swaps: it marks the surge pod (berth.dev/swap-for) and deletes
// one admitted replica of an older ReplicaSet of the same Deployment, whose
// quota is released with its pod; the surge pod is then first in line for
// it. One swap per Deployment is under way at a time, so berth never takes
// more than one replica at once from a Deployment and never lets usage
// exceed quota. docs/serving.md says what a tenant can and cannot do with
// it.
type Rollouts struct {
	client   client.Client
	engine   Explainer
	recorder events.EventRecorder
}

// Explainer says why a pending workload is not admitted, as the engine
// sees it now (the scheduler). A workload that merely waits its turn has
// no reason in its status unless --pending-status-delay is set, so the
// engine is asked.
type Explainer interface {
	Explain(key admission.WorkloadKey) (admission.Explanation, bool)
}

// retry is how soon a Deployment with a gated surge pod is looked at
// again: whether the pod waits for quota is the engine's to say, and no
// object changes when it starts to.
const retry = 2 * time.Second

// NewRollouts returns the rolling-update controller.
func NewRollouts(c client.Client, engine Explainer, recorder events.EventRecorder) *Rollouts {
	return &Rollouts{client: c, engine: engine, recorder: recorder}
}

// Name of the controller.
func (r *Rollouts) Name() string { return "deployment-rollout" }

// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets,verbs=get;list;watch

// Register watches queued Deployments, their pods and the Workloads of
// their replicas, each mapped to the Deployment, and indexes ReplicaSets
// and pods by controller (ControllerIndex), which the Deployment kind's
// reconciler reads too: it is registered with it.
func (r *Rollouts) Register(ctx context.Context, mgr ctrl.Manager) error {
	if err := IndexControllers(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	queued := predicate.NewPredicateFuncs(func(o client.Object) bool { return isQueued(o.GetLabels()) })
	replica := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := DeploymentKind{}.Key(o)
		return ok
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(&appsv1.Deployment{}, builder.WithPredicates(queued)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podToDeployment), builder.WithPredicates(replica)).
		Watches(&berthv1.Workload{}, handler.EnqueueRequestsFromMapFunc(r.workloadToDeployment)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("registering %s: %w", r.Name(), err)
	}
	return nil
}

// podToDeployment maps a replica's pod to its Deployment through the
// ReplicaSet's controller reference.
func (r *Rollouts) podToDeployment(ctx context.Context, o client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return nil
	}
	rs := &appsv1.ReplicaSet{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, rs); err != nil {
		return nil
	}
	d := metav1.GetControllerOf(rs)
	if d == nil || d.Kind != pods.DeploymentKind {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: d.Name}}}
}

// workloadToDeployment maps a replica's Workload to its Deployment through
// its owner pod.
func (r *Rollouts) workloadToDeployment(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[berthv1.JobKeyLabel] == "" {
		return nil
	}
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind != "Pod" {
			continue
		}
		p := &corev1.Pod{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, p); err == nil {
			return r.podToDeployment(ctx, p)
		}
	}
	return nil
}

// Reconcile swaps one old replica for a waiting surge pod when the rule
// of Swap allows it.
func (r *Rollouts) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &appsv1.Deployment{}
	if err := r.client.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !isQueued(d.Labels) || !d.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	rss, err := replicaSetsOf(ctx, r.client, d)
	if err != nil {
		return reconcile.Result{}, err
	}
	list, err := queuedPodsOf(ctx, r.client, d.Namespace, uids(rss)...)
	if err != nil {
		return reconcile.Result{}, err
	}
	newRS, _ := splitReplicaSets(d, rss)
	waiting := map[string]bool{}
	surging := false
	for i := range list {
		p := &list[i]
		if ref := metav1.GetControllerOf(p); !pods.IsGated(p) || ref == nil || ref.UID != newRS {
			continue
		}
		surging = true
		ok, err := r.waitsForQuota(ctx, p)
		if err != nil {
			return reconcile.Result{}, err
		}
		waiting[p.Name] = ok
	}
	surge, donor := Swap(d, rss, list, waiting)
	if surge == nil {
		if surging {
			return reconcile.Result{RequeueAfter: retry}, nil
		}
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.swap(ctx, d, surge, donor)
}

// waitsForQuota reports whether a gated pod's Workload waits because the
// quota is full: not holding quota, and InsufficientQuota as the engine
// explains it now (or, when pending reasons are written, in its status).
//
// A replica that waits without a Workload (docs/serving.md, "One write per
// replica") is in the engine under the name its Workload would have.
func (r *Rollouts) waitsForQuota(ctx context.Context, p *corev1.Pod) (bool, error) {
	wl := &berthv1.Workload{}
	_, key, _ := pods.ServingKey(p)
	name := jobs.KeyWorkloadName(pods.DeploymentKind, p.Namespace, key)
	err := r.client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, wl)
	if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	if err == nil {
		c := apimeta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved)
		switch {
		case c != nil && c.Status == metav1.ConditionTrue:
			return false, nil
		case c != nil && c.Reason == string(berthv1.ReasonInsufficientQuota):
			return true, nil
		}
	}
	e, ok := r.engine.Explain(admission.WorkloadKey{Namespace: p.Namespace, Name: name})
	return ok && e.Reason == admission.InsufficientQuota, nil
}

// swap marks the surge pod first, so that a swap interrupted between the
// two writes is finished by the next reconcile rather than started again
// with another donor, then deletes the donor (by UID: a pod re-created
// under its name is not touched).
func (r *Rollouts) swap(ctx context.Context, d *appsv1.Deployment, surge, donor *corev1.Pod) error {
	if surge.Annotations[berthv1.SwapAnnotation] != donor.Name {
		patch := client.MergeFrom(surge.DeepCopy())
		if surge.Annotations == nil {
			surge.Annotations = map[string]string{}
		}
		surge.Annotations[berthv1.SwapAnnotation] = donor.Name
		if err := r.client.Patch(ctx, surge, patch); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("marking surge pod %s: %w", surge.Name, err))
		}
	}
	err := r.client.Delete(ctx, donor, client.Preconditions{UID: &donor.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s to make room for surge pod %s: %w", donor.Name, surge.Name, err)
	}
	r.recorder.Eventf(d, surge, corev1.EventTypeNormal, EventSwapped, "Swap",
		"quota full during a rolling update: deleted old replica %s so that new replica %s takes its quota", donor.Name, surge.Name)
	return nil
}

// Swap decides one step of a rolling update at full quota: the gated surge
// pod to admit on an old replica's quota and that replica, or nils. The
// rule, precisely:
//
//   - the Deployment is not paused and uses the RollingUpdate strategy;
//   - the surge pod belongs to the Deployment's new ReplicaSet: controlled
//     by the Deployment (by UID) and of the Deployment's own revision;
//   - its Workload waits with InsufficientQuota (waiting, by pod name);
//   - no other swap of the Deployment is under way: no gated pod of its
//     new ReplicaSet carries berth.dev/swap-for (a marked pod whose donor
//     still runs has its swap finished: the donor is deleted);
//   - the donor is a released, running pod of another ReplicaSet the
//     Deployment controls: not Ready first, then the youngest.
func Swap(d *appsv1.Deployment, rss []appsv1.ReplicaSet, all []corev1.Pod, waiting map[string]bool) (*corev1.Pod, *corev1.Pod) {
	if d.Spec.Paused || d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return nil, nil
	}
	newRS, old := splitReplicaSets(d, rss)
	if newRS == "" || len(old) == 0 {
		return nil, nil
	}
	var surges, donors []*corev1.Pod
	byName := map[string]*corev1.Pod{}
	for i := range all {
		p := &all[i]
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "ReplicaSet" {
			continue
		}
		alive := p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
		switch {
		case ref.UID == newRS && pods.IsGated(p) && alive:
			surges = append(surges, p)
		case old[ref.UID] && !pods.IsGated(p) && alive:
			donors = append(donors, p)
			byName[p.Name] = p
		}
	}
	slices.SortFunc(surges, olderFirst)
	for _, s := range surges {
		if name := s.Annotations[berthv1.SwapAnnotation]; name != "" {
			if donor, ok := byName[name]; ok {
				return s, donor // marked, but its donor is not deleted yet
			}
			// Under way for as long as s is gated, whatever its Workload
			// says: if the freed quota went to another workload, no second
			// replica is taken from the Deployment.
			return nil, nil
		}
	}
	if len(donors) == 0 {
		return nil, nil
	}
	slices.SortFunc(donors, func(a, b *corev1.Pod) int {
		if ra, rb := ready(a), ready(b); ra != rb {
			if !ra {
				return -1
			}
			return 1
		}
		return -olderFirst(a, b)
	})
	for _, s := range surges {
		if waiting[s.Name] {
			return s, donors[0]
		}
	}
	return nil, nil
}

// splitReplicaSets returns the UID of the Deployment's new ReplicaSet (the
// one it controls whose revision is the Deployment's) and the set of its
// other ReplicaSets.
func splitReplicaSets(d *appsv1.Deployment, rss []appsv1.ReplicaSet) (types.UID, map[types.UID]bool) {
	rev, ok := revision(d)
	if !ok {
		return "", nil
	}
	var newRS types.UID
	old := map[types.UID]bool{}
	for i := range rss {
		rs := &rss[i]
		ref := metav1.GetControllerOf(rs)
		if ref == nil || ref.UID != d.UID {
			continue
		}
		if r, ok := revision(rs); ok && r == rev && newRS == "" {
			newRS = rs.UID
			continue
		}
		old[rs.UID] = true
	}
	return newRS, old
}

func revision(o client.Object) (int64, bool) {
	r, err := strconv.ParseInt(o.GetAnnotations()[revisionAnnotation], 10, 64)
	return r, err == nil
}

func ready(p *corev1.Pod) bool {
	c := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	return c >= 0 && p.Status.Conditions[c].Status == corev1.ConditionTrue
}

func olderFirst(a, b *corev1.Pod) int {
	if pods.Older(a, b) {
		return -1
	}
	if pods.Older(b, a) {
		return 1
	}
	return 0
}
