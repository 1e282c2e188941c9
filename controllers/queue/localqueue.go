package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/scheduler"
	"github.com/berth-dev/berth/controllers/workload"
)

// LocalQueueReconciler writes LocalQueue status.
type LocalQueueReconciler struct {
	client   Store
	sched    LocalQueueEngine
	throttle *throttle
	queues   LocalQueueMetrics
	series   bool
	// facts are, per queue, what its replicas without a Workload were last
	// fed with (its ClusterQueue, stop policy and weight): a change feeds
	// them again (ResyncRecords). Workers reconcile queues concurrently.
	factsMu sync.Mutex
	facts   map[string]string
}

// NewLocalQueueReconciler returns a LocalQueue reconciler that writes a
// queue's counts within limits (conditions at once), feeds the admitted
// workloads of a queue stopped with HoldAndDrain to the engine, which evicts
// them, and, with series, sets the queue's own series in queues.
func NewLocalQueueReconciler(c Store, sched LocalQueueEngine, limits StatusLimits,
	queues LocalQueueMetrics, series bool) *LocalQueueReconciler {
	return &LocalQueueReconciler{client: c, sched: sched, throttle: newThrottle(limits), queues: queues, series: series, facts: map[string]string{}}
}

// Name of the controller.
func (r *LocalQueueReconciler) Name() string { return "localqueue" }

// Register adds the reconciler to mgr. It relies on the indexes the
// workload reconciler registers.
func (r *LocalQueueReconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(&berthv1.LocalQueue{}).
		Watches(&berthv1.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.forClusterQueue)).
		Watches(&berthv1.Workload{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: o.(*berthv1.Workload).Spec.QueueName}}}
		})).
		Complete(r)
}

// +kubebuilder:rbac:groups=berth.dev,resources=localqueues,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=localqueues/status,verbs=get;update;patch

// Reconcile writes one LocalQueue's status.
func (r *LocalQueueReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	lq := &berthv1.LocalQueue{}
	if err := r.client.Get(ctx, req.NamespacedName, lq); err != nil {
		if apierrors.IsNotFound(err) {
			r.throttle.forget(req.String())
			if r.series {
				r.queues.ForgetLocalQueue(req.Namespace, req.Name)
			}
			return reconcile.Result{}, r.resyncRecords(ctx, req.Namespace, req.Name, "")
		}
		return reconcile.Result{}, fmt.Errorf("reading LocalQueue %s: %w", req, err)
	}
	if err := r.resyncRecords(ctx, lq.Namespace, lq.Name, queueFacts(lq)); err != nil {
		return reconcile.Result{}, err
	}
	active, err := r.activeCondition(ctx, lq)
	if err != nil {
		return reconcile.Result{}, err
	}
	if lq.Spec.StopPolicy == berthv1.StopPolicyHoldAndDrain {
		if err := r.drain(ctx, lq); err != nil {
			return reconcile.Result{}, err
		}
	}
	base := lq.DeepCopy()
	meta.SetStatusCondition(&lq.Status.Conditions, active)
	counts := r.sched.LocalQueueCounts(lq.Namespace, lq.Name)
	lq.Status.PendingWorkloads, lq.Status.AdmittedWorkloads = counts.Pending, counts.Admitted
	if r.series {
		r.queues.ReportLocalQueue(lq.Namespace, lq.Name, int(counts.Pending), int(counts.Admitted))
	}
	// As for ClusterQueues: a queue that holds workloads is looked at again,
	// since the counts can change after this read without another event.
	recheck := reconcile.Result{}
	if lq.Status.PendingWorkloads+lq.Status.AdmittedWorkloads > 0 {
		recheck.RequeueAfter = r.throttle.period()
	}
	if equality.Semantic.DeepEqual(base.Status, lq.Status) {
		return recheck, nil
	}
	if meta.FindStatusCondition(base.Status.Conditions, berthv1.ConditionActive) != nil &&
		equality.Semantic.DeepEqual(base.Status.Conditions, lq.Status.Conditions) {
		if wait := r.throttle.wait(req.String()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.client.Status().Patch(ctx, lq, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing status of LocalQueue %s: %w", req, err)
	}
	r.throttle.wrote(req.String())
	return recheck, nil
}

// queueFacts is what of a LocalQueue the engine decides its workloads on.
func queueFacts(lq *berthv1.LocalQueue) string {
	weight := ""
	if fs := lq.Spec.FairSharing; fs != nil && fs.Weight != nil {
		weight = fs.Weight.String()
	}
	return fmt.Sprintf("%s|%s|%s|%s", lq.Spec.ClusterQueue, lq.Spec.StopPolicy, weight, strings.Join(lq.Spec.PriorityClasses, ","))
}

// resyncRecords feeds the queue's replicas without a Workload to the engine
// again when its facts changed since they were last looked at ("" for a
// queue that is gone), and at the first look at a queue, which may have
// changed before this reconciler saw it.
func (r *LocalQueueReconciler) resyncRecords(ctx context.Context, namespace, name, facts string) error {
	key := namespace + "/" + name
	r.factsMu.Lock()
	was, seen := r.facts[key]
	if facts == "" {
		delete(r.facts, key)
	} else {
		r.facts[key] = facts
	}
	r.factsMu.Unlock()
	if seen && was == facts {
		return nil
	}
	if err := r.sched.ResyncRecords(ctx, namespace, name); err != nil {
		return fmt.Errorf("feeding the replicas of LocalQueue %s again: %w", key, err)
	}
	return nil
}

// drain feeds the admitted workloads of a LocalQueue stopped with
// HoldAndDrain to the engine with their queue's state: the engine evicts
// them and the scheduler writes the evictions; their jobs are suspended and
// they wait, held, until the queue is resumed. (The workload reconciler
// re-feeds only pending workloads when a queue changes.)
func (r *LocalQueueReconciler) drain(ctx context.Context, lq *berthv1.LocalQueue) error {
	wls := &berthv1.WorkloadList{}
	if err := r.client.List(ctx, wls, client.InNamespace(lq.Namespace), client.MatchingFields{workload.QueueNameIndex: lq.Name}); err != nil {
		return fmt.Errorf("listing workloads of LocalQueue %s/%s: %w", lq.Namespace, lq.Name, err)
	}
	for i := range wls.Items {
		if wls.Items[i].Status.Admission == nil {
			continue
		}
		if err := r.sched.Sync(ctx, &wls.Items[i]); err != nil {
			return fmt.Errorf("feeding workload %s/%s of drained LocalQueue %s: %w", lq.Namespace, wls.Items[i].Name, lq.Name, err)
		}
	}
	return nil
}

func (r *LocalQueueReconciler) activeCondition(ctx context.Context, lq *berthv1.LocalQueue) (metav1.Condition, error) {
	cond := metav1.Condition{Type: berthv1.ConditionActive, ObservedGeneration: lq.Generation}
	if p := lq.Spec.StopPolicy; p == berthv1.StopPolicyHold || p == berthv1.StopPolicyHoldAndDrain {
		cond.Status, cond.Reason = metav1.ConditionFalse, berthv1.ReasonStopped
		cond.Message = fmt.Sprintf("stopPolicy is %s: the LocalQueue's workloads wait until it is resumed", p)
		return cond, nil
	}
	cq := &berthv1.ClusterQueue{}
	err := r.client.Get(ctx, client.ObjectKey{Name: lq.Spec.ClusterQueue}, cq)
	switch {
	case apierrors.IsNotFound(err):
		cond.Status, cond.Reason = metav1.ConditionFalse, berthv1.ReasonQueueClusterQueueNotFound
		cond.Message = fmt.Sprintf("ClusterQueue %q does not exist: create it; workloads wait until then", lq.Spec.ClusterQueue)
		return cond, nil
	case err != nil:
		return cond, fmt.Errorf("reading ClusterQueue %s: %w", lq.Spec.ClusterQueue, err)
	}
	ok, err := scheduler.NamespaceAllowed(ctx, r.client, cq, lq.Namespace)
	if err != nil {
		return cond, err
	}
	if !ok {
		cond.Status, cond.Reason = metav1.ConditionFalse, berthv1.ReasonQueueNamespaceNotAllowed
		cond.Message = scheduler.NotAllowedMessage(cq, lq.Namespace)
		return cond, nil
	}
	if c := meta.FindStatusCondition(cq.Status.Conditions, berthv1.ConditionActive); c != nil && c.Status == metav1.ConditionFalse {
		cond.Status, cond.Reason = metav1.ConditionFalse, c.Reason
		cond.Message = fmt.Sprintf("ClusterQueue %q is not active: %s", cq.Name, c.Message)
		return cond, nil
	}
	cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, berthv1.ReasonReady, "the LocalQueue accepts workloads"
	return cond, nil
}

func (r *LocalQueueReconciler) forClusterQueue(ctx context.Context, o client.Object) []reconcile.Request {
	lqs := &berthv1.LocalQueueList{}
	if err := r.client.List(ctx, lqs, client.MatchingFields{workload.ClusterQueueIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing LocalQueues of ClusterQueue", "clusterQueue", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(lqs.Items))
	for i := range lqs.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&lqs.Items[i])})
	}
	return out
}
