package jobs

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// How a Reconciler joins a manager: its cache indexes, its watches and its
// workers.

// Name of the controller, for logs and metrics.
func (r *Reconciler) Name() string { return strings.ToLower(r.kind.GVK().Kind) }

// GVK is the kind of job the reconciler queues.
func (r *Reconciler) GVK() schema.GroupVersionKind { return r.kind.GVK() }

// Index registers the cache indexes the reconciler reads through: Workloads
// by their owner of the kind, or the kind's objects by gang key. They index
// Workloads, or objects of a kind the cluster serves, so a kind whose API
// appears only after the manager started (Register then) has them from the
// start: an informer takes no index once it runs.
func (r *Reconciler) Index(ctx context.Context, mgr ctrl.Manager) error {
	if r.indexed {
		return nil
	}
	if res, ok := r.kind.(Resolver); ok {
		if err := IndexKeys(ctx, mgr.GetFieldIndexer(), r.kind, res); err != nil {
			return err
		}
	} else if err := IndexOwner(ctx, mgr, r.kind.GVK()); err != nil {
		return err
	}
	r.indexed = true
	return nil
}

// Register adds the reconciler to mgr: it watches labelled jobs of its kind
// and the Workloads they own, and whatever else the kind asks for.
func (r *Reconciler) Register(ctx context.Context, mgr ctrl.Manager) error {
	if err := r.Index(ctx, mgr); err != nil {
		return err
	}
	if res, ok := r.kind.(Resolver); ok {
		return r.registerResolved(ctx, mgr, res)
	}
	labelled := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[berthv1.QueueNameLabel]
		return ok
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		For(r.kind.NewObject(), builder.WithPredicates(labelled)).
		Watches(&berthv1.Workload{}, workloadEvents(ownerGang(r.kind.GVK()))).
		WithOptions(r.controllerOptions())
	if w, ok := r.kind.(Watcher); ok {
		if err := w.Watch(ctx, mgr, b); err != nil {
			return fmt.Errorf("registering %s watches: %w", r.Name(), err)
		}
	}
	return b.Complete(r)
}

// controllerOptions reconcile up to opts.Workers jobs at once. The work
// queue never hands the same job to two workers, and each job's writes
// touch only its own Workload and pods, so jobs need no lock between them.
func (r *Reconciler) controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: max(r.opts.Workers, 1)}
}
