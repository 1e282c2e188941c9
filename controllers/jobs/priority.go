package jobs

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// ActPriority is the work-queue priority of a gang whose Workload has just
// become one its job must act on: admitted (its pods are released) or
// being evicted (its job is stopped). Pod and job events queue at the
// default priority 0, and in a burst the queue holds thousands of them for
// gangs still arriving; an admitted gang waiting behind them holds quota
// that nothing uses, and a victim behind them keeps its preemptor waiting.
const ActPriority = 100

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// workloadEvents enqueues the gang that toGang maps a Workload to: ahead of
// everything else when the Workload's update asks its job to act
// (mustAct), behind everything else for the initial list and resyncs (as
// controller-runtime's own handlers do), at the default priority otherwise.
func workloadEvents(toGang func(*berthv1.Workload) (reconcile.Request, bool)) handler.EventHandler {
	add := func(q queue, o client.Object, priority int) {
		wl, ok := o.(*berthv1.Workload)
		if !ok {
			return
		}
		req, ok := toGang(wl)
		if !ok {
			return
		}
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok && priority != 0 {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
			return
		}
		q.Add(req)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			priority := 0
			if e.IsInInitialList {
				priority = handler.LowPriority
			}
			add(q, e.Object, priority)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			priority := 0
			switch {
			case e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion():
				priority = handler.LowPriority // a resync: nothing changed
			case mustAct(e.ObjectOld, e.ObjectNew):
				priority = ActPriority
			}
			add(q, e.ObjectOld, priority)
			add(q, e.ObjectNew, priority)
		},
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q queue) { add(q, e.Object, 0) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { add(q, e.Object, 0) },
	}
}

// mustAct reports whether a Workload's update asks its job to act now: it
// may run and could not before, or it is being evicted and was not.
func mustAct(old, updated client.Object) bool {
	o, ok1 := old.(*berthv1.Workload)
	n, ok2 := updated.(*berthv1.Workload)
	if !ok1 || !ok2 {
		return false
	}
	was, is := lifecycle.PhaseOf(o), lifecycle.PhaseOf(n)
	return (lifecycle.MayRun(is) && !lifecycle.MayRun(was)) || (is == lifecycle.Evicting && was != lifecycle.Evicting)
}

// keyGang maps a Workload of a resolved kind to its gang key (its
// berth.dev/job-key label).
func keyGang(wl *berthv1.Workload) (reconcile.Request, bool) {
	key := wl.Labels[berthv1.JobKeyLabel]
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: key}}, key != ""
}

// ownerGang maps a Workload to the job of kind gvk that controls it, as
// handler.EnqueueRequestForOwner with OnlyControllerOwner does.
func ownerGang(gvk schema.GroupVersionKind) func(*berthv1.Workload) (reconcile.Request, bool) {
	return func(wl *berthv1.Workload) (reconcile.Request, bool) {
		ref := metav1.GetControllerOf(wl)
		if ref == nil || ref.Kind != gvk.Kind {
			return reconcile.Request{}, false
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != gvk.Group {
			return reconcile.Request{}, false
		}
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: ref.Name}}, true
	}
}
