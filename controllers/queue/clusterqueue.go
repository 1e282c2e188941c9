// Package queue reconciles ClusterQueues and LocalQueues: it gives the
// scheduler each ClusterQueue's spec, and writes both kinds' status —
// whether the queue can admit, and what it holds. Status writes are
// throttled per queue, so a busy queue costs at most one write per
// interval however many workloads it admits, and per kind, so that a
// thousand queues do not cost a thousand writes per interval.
package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/flavors"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// ClusterQueueReconciler feeds ClusterQueues to the scheduler and writes
// their status.
type ClusterQueueReconciler struct {
	client   Store
	sched    ClusterQueueEngine
	throttle *throttle
	queues   ClusterQueueMetrics
}

// NewClusterQueueReconciler returns a ClusterQueue reconciler that writes a
// queue's counts within limits (conditions at once) and sets the queue's
// series in queues on every look at it (no writes: the series cost nothing
// of the API server's). A queue stopped with HoldAndDrain is drained by the
// engine, which is fed its stopPolicy.
func NewClusterQueueReconciler(c Store, sched ClusterQueueEngine, limits StatusLimits, queues ClusterQueueMetrics) *ClusterQueueReconciler {
	return &ClusterQueueReconciler{client: c, sched: sched, throttle: newThrottle(limits), queues: queues}
}

// Name of the controller.
func (r *ClusterQueueReconciler) Name() string { return "clusterqueue" }

// Register adds the reconciler to mgr. Workload changes requeue their
// ClusterQueue (for its counts); flavor changes requeue every ClusterQueue.
func (r *ClusterQueueReconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(&berthv1.ClusterQueue{}).
		Watches(&berthv1.ResourceFlavor{}, handler.EnqueueRequestsFromMapFunc(r.allClusterQueues)).
		Watches(&berthv1.Workload{}, handler.EnqueueRequestsFromMapFunc(r.forWorkload)).
		Complete(r)
}

// +kubebuilder:rbac:groups=berth.dev,resources=clusterqueues,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=clusterqueues/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=berth.dev,resources=resourceflavors,verbs=get;list;watch

// Reconcile feeds one ClusterQueue to the scheduler and writes its status.
func (r *ClusterQueueReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cq := &berthv1.ClusterQueue{}
	if err := r.client.Get(ctx, req.NamespacedName, cq); err != nil {
		if apierrors.IsNotFound(err) {
			r.sched.DeleteClusterQueue(req.Name)
			r.throttle.forget(req.Name)
			r.queues.ForgetClusterQueue(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading ClusterQueue %s: %w", req.Name, err)
	}
	flavors, err := r.flavors(ctx, cq)
	if err != nil {
		return reconcile.Result{}, err
	}
	missing := flavors.Missing
	active := metav1.Condition{Type: berthv1.ConditionActive, Status: metav1.ConditionTrue, Reason: berthv1.ReasonReady, Message: "the ClusterQueue can admit workloads"}
	if err := r.sched.UpsertClusterQueue(cq, flavors, false); err != nil {
		active = metav1.Condition{Type: berthv1.ConditionActive, Status: metav1.ConditionFalse, Reason: berthv1.ReasonQueueInvalidSpec, Message: err.Error()}
	} else if len(missing) > 0 {
		active = metav1.Condition{Type: berthv1.ConditionActive, Status: metav1.ConditionFalse, Reason: berthv1.ReasonFlavorNotFound,
			Message: fmt.Sprintf("ResourceFlavors %s do not exist: create them; until then the queue admits nothing", strings.Join(missing, ", "))}
	} else if cq.Spec.StopPolicy == berthv1.StopPolicyHold || cq.Spec.StopPolicy == berthv1.StopPolicyHoldAndDrain {
		active = metav1.Condition{Type: berthv1.ConditionActive, Status: metav1.ConditionFalse, Reason: berthv1.ReasonStopped,
			Message: fmt.Sprintf("stopPolicy is %s: the queue admits nothing new", cq.Spec.StopPolicy)}
	}
	base := cq.DeepCopy()
	active.ObservedGeneration = cq.Generation
	meta.SetStatusCondition(&cq.Status.Conditions, active)
	st, ok := r.sched.ClusterQueueStatus(cq.Name)
	if ok {
		cq.Status.PendingWorkloads = st.PendingWorkloads
		cq.Status.AdmittedWorkloads = st.AdmittedWorkloads
		cq.Status.FlavorsUsage = st.FlavorsUsage
	}
	r.queues.ReportClusterQueue(clusterQueueReport(cq, active, st))
	// The engine can change after this read without another event for the
	// queue: a Workload's event reaches this reconciler and the one that
	// feeds the engine at once, in either order. A queue that holds
	// workloads is looked at again, so its counts are never left stale
	// (without a write unless they changed).
	recheck := reconcile.Result{}
	if cq.Status.PendingWorkloads+cq.Status.AdmittedWorkloads > 0 {
		recheck.RequeueAfter = r.throttle.period()
	}
	if equality.Semantic.DeepEqual(base.Status, cq.Status) {
		return recheck, nil
	}
	// Conditions are written at once; counts and usage at most once per
	// period.
	if meta.FindStatusCondition(base.Status.Conditions, berthv1.ConditionActive) != nil &&
		equality.Semantic.DeepEqual(base.Status.Conditions, cq.Status.Conditions) {
		if wait := r.throttle.wait(cq.Name); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.client.Status().Patch(ctx, cq, client.MergeFrom(base)); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing status of ClusterQueue %s: %w", cq.Name, err)
	}
	r.throttle.wrote(cq.Name)
	return recheck, nil
}

// missingFlavors lists the flavors the queue names that do not exist.
// flavors reads the flavors cq lists: which do not exist, and the node
// labels of the others, which the engine matches the pods' own node
// constraints against. Every change of a flavor reconciles every queue
// (Register), so a relabelled flavor reaches the engine with its queues.
func (r *ClusterQueueReconciler) flavors(ctx context.Context, cq *berthv1.ClusterQueue) (lifecycle.QueueFlavors, error) {
	var names []string
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			names = append(names, f.Name)
		}
	}
	missing, labels, err := flavors.New(r.client).Lookup(ctx, names)
	return lifecycle.QueueFlavors{Missing: missing, NodeLabels: labels}, err
}

func (r *ClusterQueueReconciler) allClusterQueues(ctx context.Context, _ client.Object) []reconcile.Request {
	cqs := &berthv1.ClusterQueueList{}
	if err := r.client.List(ctx, cqs); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ClusterQueues")
		return nil
	}
	out := make([]reconcile.Request, 0, len(cqs.Items))
	for i := range cqs.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: cqs.Items[i].Name}})
	}
	return out
}

func (r *ClusterQueueReconciler) forWorkload(ctx context.Context, o client.Object) []reconcile.Request {
	wl := o.(*berthv1.Workload)
	if wl.Status.Admission != nil {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: wl.Status.Admission.ClusterQueue}}}
	}
	lq := &berthv1.LocalQueue{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, lq); err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: lq.Spec.ClusterQueue}}}
}

// StatusLimits bound how often the counts and usage in queue status are
// written; a change of conditions is written at once.
type StatusLimits struct {
	// Interval is the shortest time between two writes of one queue.
	Interval time.Duration
	// Rate is the most writes per second for all queues of one kind: with
	// many queues each is written less often than Interval, so that queue
	// status never competes with admissions for the API server. Zero sets
	// no such budget.
	Rate float64
}

// throttle remembers when each queue's status was last written.
type throttle struct {
	limits StatusLimits
	mu     sync.Mutex
	last   map[string]time.Time
}

func newThrottle(limits StatusLimits) *throttle {
	return &throttle{limits: limits, last: map[string]time.Time{}}
}

// period is the shortest time between two writes of one queue: the
// interval, or longer when the queues known would otherwise exceed the
// rate.
func (t *throttle) period() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.periodLocked()
}

func (t *throttle) periodLocked() time.Duration {
	if t.limits.Rate <= 0 {
		return t.limits.Interval
	}
	spread := time.Duration(float64(len(t.last)) / t.limits.Rate * float64(time.Second))
	return max(t.limits.Interval, spread)
}

// wait returns how long to wait before the next write of name's status.
func (t *throttle) wait(name string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.last[name]
	if !ok {
		return 0
	}
	return time.Until(last.Add(t.periodLocked()))
}

func (t *throttle) wrote(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last[name] = time.Now()
}

func (t *throttle) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, name)
}
