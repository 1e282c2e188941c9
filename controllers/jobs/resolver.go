package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// KeyIndexKey is the cache index of a Resolver kind's objects by their
// gang key.
func KeyIndexKey(gvk schema.GroupVersionKind) string {
	return "berth.dev/gang-key-" + strings.ToLower(gvk.Kind)
}

// IndexKeys indexes the objects of a Resolver kind by their gang key. A
// burst of small pod groups puts thousands of pods into one namespace;
// without the index each gang's reconcile would filter all of them.
func IndexKeys(ctx context.Context, indexer client.FieldIndexer, kind Kind, res Resolver) error {
	err := indexer.IndexField(ctx, kind.NewObject(), KeyIndexKey(kind.GVK()), func(o client.Object) []string {
		if key, ok := res.Key(o); ok {
			return []string{key}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing %s by gang key: %w", kind.GVK().Kind, err)
	}
	return nil
}

// registerResolved watches the objects of a Resolver kind and the Workloads
// of their gangs, both mapped to the gang's key (indexed by Index).
func (r *Reconciler) registerResolved(_ context.Context, mgr ctrl.Manager, res Resolver) error {
	toKey := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		key, ok := res.Key(o)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: key}}}
	})
	ofKind := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[berthv1.JobKeyLabel] != "" && strings.HasPrefix(o.GetName(), strings.ToLower(r.kind.GVK().Kind)+"-")
	})
	var objPreds []predicate.Predicate
	if _, pods := r.kind.NewObject().(*corev1.Pod); pods {
		objPreds = append(objPreds, PodGangChanges())
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.Name()).
		Watches(r.kind.NewObject(), toKey, builder.WithPredicates(objPreds...)).
		Watches(&berthv1.Workload{}, workloadEvents(keyGang), builder.WithPredicates(ofKind)).
		WatchesRawSource(source.Channel(r.wakes, toKey)).
		WithOptions(r.controllerOptions())
	return b.Complete(r)
}

// WaitError is what a Resolver returns for a gang that must not be queued
// yet, for a reason that clears by itself: the key is looked at again after
// Delay, and nothing is logged as an error.
type WaitError struct {
	// Reason says why the gang waits.
	Reason string
	// Delay is how soon to look again.
	Delay time.Duration
}

// Error is the reason.
func (e *WaitError) Error() string { return e.Reason }

// reconcileResolved brings the gang of one key and its Workload in step.
func (r *Reconciler) reconcileResolved(ctx context.Context, res Resolver, req reconcile.Request) (reconcile.Result, error) {
	g, err := res.Resolve(ctx, r.client, req.Namespace, req.Name)
	if wait := (*WaitError)(nil); errors.As(err, &wait) {
		log.FromContext(ctx).V(1).Info("gang not queued yet", "reason", wait.Reason)
		return reconcile.Result{RequeueAfter: wait.Delay}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading gang %s: %w", req, err)
	}
	name := KeyWorkloadName(r.kind.GVK().Kind, req.Namespace, req.Name)
	if g == nil {
		if r.opts.Records != nil {
			r.opts.Records.Forget(ctx, admission.WorkloadKey{Namespace: req.Namespace, Name: name})
		}
		return reconcile.Result{}, r.deleteKeyWorkloads(ctx, req.Namespace, req.Name)
	}
	return r.reconcileGang(ctx, gang{job: g, workload: name, key: req.Name})
}

// deleteKeyWorkloads deletes the Workload of a gang none of whose objects
// are left. Its name follows from the kind and key (KeyWorkloadName), so
// one read finds it: listing the namespace's Workloads by the key label
// instead cost a scan of all of them per reconcile, and tearing down a
// namespace of N gangs N scans of N Workloads. A Workload of that name
// without the gang's key label is not the gang's, and is left alone.
func (r *Reconciler) deleteKeyWorkloads(ctx context.Context, namespace, key string) error {
	wl := &berthv1.Workload{}
	name := KeyWorkloadName(r.kind.GVK().Kind, namespace, key)
	// The gang is gone: a gang of the same key that comes back gets its
	// Workload created again, even one created a moment ago (created.go).
	r.created.seen(client.ObjectKey{Namespace: namespace, Name: name})
	err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, wl)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading workload %s/%s of gang %s: %w", namespace, name, key, err)
	}
	if wl.Labels[berthv1.JobKeyLabel] != key {
		return nil
	}
	r.assumed.forget(client.ObjectKeyFromObject(wl))
	if err := r.client.Delete(ctx, wl); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting workload %s/%s: %w", namespace, name, err)
	}
	return nil
}

// KeyWorkloadName is the deterministic name of the Workload of a gang made
// of several objects (lifecycle.KeyWorkloadName).
func KeyWorkloadName(kind, namespace, key string) string {
	return lifecycle.KeyWorkloadName(kind, namespace, key)
}

// setOwners makes the gang's objects own its Workload: the controller
// reference of one object, or the owner references of an Owned gang.
func (r *Reconciler) setOwners(g gang, wl *berthv1.Workload) error {
	if o, ok := g.job.(Owned); ok {
		wl.OwnerReferences = o.Owners()
		if wl.Labels == nil {
			wl.Labels = map[string]string{}
		}
		wl.Labels[berthv1.JobKeyLabel] = g.key
		return nil
	}
	if err := ctrlSetController(g.job.Object(), wl, r.client); err != nil {
		return fmt.Errorf("owning workload: %w", err)
	}
	return nil
}
