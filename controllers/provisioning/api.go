package provisioning

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/flavors"
)

// CRDName is the CustomResourceDefinition of ProvisioningRequests.
const CRDName = "provisioningrequests.autoscaling.x-k8s.io"

// settleRetry is how soon the API is looked at again while the CRD object
// and discovery disagree (a CRD just created or deleted).
const settleRetry = time.Second

// APIMissingMessage says what to install when the API is not served.
const APIMissingMessage = "the cluster does not serve the ProvisioningRequest API (autoscaling.x-k8s.io/v1): " +
	"install cluster-autoscaler with ProvisioningRequest support and its CRD " + CRDName +
	" (on kwok clusters: berth-autoscaler, see docs/autoscaler.md); gangs that need capacity bookings wait until then"

// apiState tracks whether the cluster serves ProvisioningRequests. It is
// safe for concurrent use.
type apiState struct {
	mu        sync.Mutex
	available bool
	watching  bool
	// onAvailable starts what needs the API (the request watch); called
	// once, the first time the API is seen.
	onAvailable func() error
	// changed is told every change, to re-reconcile flavors and workloads.
	changed []chan event.GenericEvent
}

// Available reports whether the API was served when last checked.
func (s *apiState) Available() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.available
}

// set records the availability and reports whether it changed.
func (s *apiState) set(available bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := s.available != available
	s.available = available
	if available && !s.watching && s.onAvailable != nil {
		if err := s.onAvailable(); err != nil {
			return changed, err
		}
		s.watching = true
	}
	return changed, nil
}

// Discovery is the discovery call the API watch makes; a
// discovery.DiscoveryInterface implements it.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// served asks discovery whether autoscaling.x-k8s.io/v1 serves
// provisioningrequests.
func served(d Discovery) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(autoscalingv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", autoscalingv1.SchemeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "provisioningrequests" {
			return true, nil
		}
	}
	return false, nil
}

// apiReconciler follows the ProvisioningRequest CRD: on every change of it
// discovery says whether the API is served.
type apiReconciler struct {
	client    client.Reader
	discovery Discovery
	state     *apiState
	all       func(ctx context.Context) []client.Object
}

func crdObject() *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(apiextensionsCRD)
	return o
}

func (r *apiReconciler) register(mgr ctrl.Manager) error {
	named := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == CRDName })
	return ctrl.NewControllerManagedBy(mgr).
		Named("provisioning-api").
		WatchesMetadata(crdObject(), &handler.EnqueueRequestForObject{}, builder.WithPredicates(named)).
		Complete(r)
}

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Reconcile checks the API after a change of the CRD.
func (r *apiReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	crd := crdObject()
	err := r.client.Get(ctx, client.ObjectKey{Name: CRDName}, crd)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("reading CRD %s: %w", CRDName, err)
	}
	exists := err == nil && crd.DeletionTimestamp.IsZero()
	ok, err := served(r.discovery)
	if err != nil {
		return reconcile.Result{}, err
	}
	changed, err := r.state.set(ok)
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		ctrl.LoggerFrom(ctx).Info("ProvisioningRequest API availability changed", "available", ok)
		r.notify(ctx)
	}
	if exists != ok {
		return reconcile.Result{RequeueAfter: settleRetry}, nil
	}
	return reconcile.Result{}, nil
}

// notify re-reconciles flavors and workloads after a change.
func (r *apiReconciler) notify(ctx context.Context) {
	objs := r.all(ctx)
	for _, ch := range r.state.changed {
		for _, o := range objs {
			select {
			case ch <- event.GenericEvent{Object: o}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// flavorStore is what the flavor reconciler reads and writes: a
// ResourceFlavor and its status.
type flavorStore interface {
	client.Reader
	Status() client.SubResourceWriter
}

// flavorReconciler reports the API's availability on every ResourceFlavor
// with a provisioning policy.
type flavorReconciler struct {
	client flavorStore
	state  Availability
	events chan event.GenericEvent
}

func (r *flavorReconciler) register(mgr ctrl.Manager) error {
	isFlavor := func(o client.Object) bool { _, ok := o.(*berthv1.ResourceFlavor); return ok }
	return ctrl.NewControllerManagedBy(mgr).
		Named("provisioning-flavor").
		For(&berthv1.ResourceFlavor{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.events, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if !isFlavor(o) {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		}))).
		Complete(r)
}

// +kubebuilder:rbac:groups=berth.dev,resources=resourceflavors,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=resourceflavors/status,verbs=get;update;patch

// Reconcile sets or removes one flavor's ProvisioningAvailable condition.
func (r *flavorReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rf, ok, err := flavors.New(r.client).Get(ctx, req.Name)
	if err != nil || !ok {
		return reconcile.Result{}, err
	}
	base := rf.DeepCopy()
	var changed bool
	switch {
	case rf.Spec.Provisioning == nil:
		changed = meta.RemoveStatusCondition(&rf.Status.Conditions, berthv1.ConditionProvisioningAvailable)
	case r.state.Available():
		changed = meta.SetStatusCondition(&rf.Status.Conditions, metav1.Condition{
			Type: berthv1.ConditionProvisioningAvailable, Status: metav1.ConditionTrue, Reason: berthv1.ReasonAPIAvailable,
			Message: "the cluster serves the ProvisioningRequest API (autoscaling.x-k8s.io/v1)", ObservedGeneration: rf.Generation,
		})
	default:
		changed = meta.SetStatusCondition(&rf.Status.Conditions, metav1.Condition{
			Type: berthv1.ConditionProvisioningAvailable, Status: metav1.ConditionFalse, Reason: berthv1.ReasonAPINotInstalled,
			Message: APIMissingMessage, ObservedGeneration: rf.Generation,
		})
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	if err := r.client.Status().Patch(ctx, rf, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing ProvisioningAvailable of ResourceFlavor %s: %w", rf.Name, err)
	}
	return reconcile.Result{}, nil
}
