package provisioning

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/workloadstatus"
)

// Event reasons recorded on Workloads.
const (
	EventRequestCreated = "ProvisioningRequestCreated"
	EventProvisioned    = "CapacityProvisioned"
	EventFailed         = "ProvisioningFailed"
	EventGaveUp         = "ProvisioningGaveUp"
	EventRevoked        = "CapacityRevoked"
	EventPodsNotReady   = "PodsNotReady"
)

// flavorRetry is how long a booking waits for a missing ResourceFlavor.
const flavorRetry = 10 * time.Second

// Reconciler carries out the capacity bookings of Workloads.
type Reconciler struct {
	client   client.Client
	reader   client.Reader
	recorder events.EventRecorder
	clock    clock.PassiveClock
	state    *apiState
	metrics  *metrics.Metrics
}

// build registers the reconciler: Workloads that book capacity, and the
// API watch's notifications; the request watch is added when the API is
// served.
func (r *Reconciler) build(mgr ctrl.Manager, notify chan event.GenericEvent) (controller.Controller, error) {
	booking := predicate.NewPredicateFuncs(func(o client.Object) bool {
		wl, ok := o.(*berthv1.Workload)
		return ok && wl.Status.Provisioning != nil
	})
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("provisioning").
		For(&berthv1.Workload{}, builder.WithPredicates(booking)).
		WatchesRawSource(source.Channel(notify, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if _, ok := o.(*berthv1.Workload); !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		}))).
		Build(r)
	if err != nil {
		return nil, fmt.Errorf("registering provisioning controller: %w", err)
	}
	return c, nil
}

// +kubebuilder:rbac:groups=berth.dev,resources=workloads,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=workloads/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=provisioningrequests,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=provisioningrequests/status,verbs=get
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one Workload's booking on.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wl := &berthv1.Workload{}
	if err := r.client.Get(ctx, req.NamespacedName, wl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	p := wl.Status.Provisioning
	if p == nil || !wl.DeletionTimestamp.IsZero() || workloadstatus.IsFinished(wl) {
		return reconcile.Result{}, nil // owner references delete the requests
	}
	booking := wl.Status.Admission != nil && p.State == berthv1.ProvisioningPending &&
		!workloadstatus.IsTrue(wl, berthv1.ConditionAdmitted) && !workloadstatus.IsEvicting(wl)
	started := p.State == berthv1.ProvisioningProvisioned && workloadstatus.IsAdmitted(wl)
	if !r.state.Available() {
		if booking {
			return reconcile.Result{}, r.waitForAPI(ctx, wl)
		}
		return reconcile.Result{}, nil
	}
	if err := r.cleanUp(ctx, wl, booking || started); err != nil {
		return reconcile.Result{}, err
	}
	if !booking && !started {
		return reconcile.Result{}, nil
	}
	rf, err := r.flavor(ctx, wl)
	if err != nil || rf == nil {
		return reconcile.Result{RequeueAfter: flavorRetry}, err
	}
	pr := &autoscalingv1.ProvisioningRequest{}
	err = r.client.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: p.RequestName}, pr)
	switch {
	case apierrors.IsNotFound(err) && booking:
		return reconcile.Result{}, r.create(ctx, wl, rf)
	case apierrors.IsNotFound(err):
		pr = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading ProvisioningRequest %s/%s: %w", wl.Namespace, p.RequestName, err)
	case !metav1.IsControlledBy(pr, wl):
		// A request of a deleted Workload of the same name, which the
		// garbage collector removes.
		return reconcile.Result{RequeueAfter: flavorRetry}, nil
	}
	if pr != nil {
		out, msg := OutcomeOf(pr)
		consumed := true
		if started && out == BookingExpired {
			if consumed, err = r.consumed(ctx, wl); err != nil {
				return reconcile.Result{}, err
			}
		}
		act := Decide(out, booking, started, consumed)
		if act.Kind != Nothing {
			return reconcile.Result{}, r.apply(ctx, wl, rf, act, msg)
		}
	}
	if started {
		return r.checkPodsReady(ctx, wl, rf)
	}
	return reconcile.Result{}, nil
}

// apply writes an action's status and records its event.
func (r *Reconciler) apply(ctx context.Context, wl *berthv1.Workload, rf *berthv1.ResourceFlavor, act Action, prMsg string) error {
	pol, request, class := rf.Spec.Provisioning, wl.Status.Provisioning.RequestName, wl.Status.Provisioning.ClassName
	var msg string
	var gaveUp bool
	written, err := workloadstatus.Patch(ctx, r.client, r.reader, wl, func(w *berthv1.Workload) bool {
		p := w.Status.Provisioning
		if p == nil || p.RequestName != request {
			return false // a newer attempt; its own request decides
		}
		now := r.clock.Now()
		switch act.Kind {
		case Admit:
			if p.State != berthv1.ProvisioningPending || w.Status.Admission == nil {
				return false
			}
			msg = fmt.Sprintf("capacity provisioned by %s (%s) in %s: %s", request, p.ClassName, DomainString(p.Topology), prMsg)
			Admission(w, msg, now)
		case Fail:
			if w.Status.Admission == nil || (p.State != berthv1.ProvisioningPending && p.State != berthv1.ProvisioningProvisioned) {
				return false
			}
			msg, gaveUp = Failure(w, act.State, prMsg, pol, now)
		case Evict:
			if !workloadstatus.IsAdmitted(w) {
				return false
			}
			msg = Eviction(w, act.State, act.Reason, fmt.Sprintf("capacity of %s was revoked: %s", request, prMsg), pol, now)
		}
		return true
	})
	if err != nil || !written {
		return err
	}
	if r.metrics != nil {
		outcome := string(act.State)
		if act.Kind == Admit {
			outcome = string(berthv1.ProvisioningProvisioned)
		}
		r.metrics.ProvisioningOutcome(class, outcome)
	}
	switch {
	case act.Kind == Admit:
		r.recorder.Eventf(wl, nil, corev1.EventTypeNormal, EventProvisioned, "Provision", "%s", msg)
	case act.Kind == Evict:
		r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, EventRevoked, "Evict", "%s", msg)
	case gaveUp:
		r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, EventGaveUp, "Provision", "%s", msg)
	default:
		r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, EventFailed, "Provision", "%s", msg)
	}
	if act.Kind == Admit {
		return nil
	}
	return r.cleanUp(ctx, wl, false)
}

// waitForAPI tells a waiting workload that the API is missing.
func (r *Reconciler) waitForAPI(ctx context.Context, wl *berthv1.Workload) error {
	_, err := workloadstatus.Patch(ctx, r.client, r.reader, wl, func(w *berthv1.Workload) bool {
		if w.Status.Admission == nil || workloadstatus.IsTrue(w, berthv1.ConditionAdmitted) {
			return false
		}
		return SetCondition(w, berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonWaitingForCapacity, APIMissingMessage, r.clock.Now())
	})
	return err
}

// flavor returns the flavor whose policy the booking follows; nil (with an
// Admitted message) when it does not exist.
func (r *Reconciler) flavor(ctx context.Context, wl *berthv1.Workload) (*berthv1.ResourceFlavor, error) {
	flavors := map[string]*berthv1.ResourceFlavor{}
	var ferr error
	name := FlavorOf(wl.Status.Admission, func(f string) bool {
		rf := &berthv1.ResourceFlavor{}
		if err := r.client.Get(ctx, client.ObjectKey{Name: f}, rf); err != nil {
			if !apierrors.IsNotFound(err) {
				ferr = err
			}
			return false
		}
		flavors[f] = rf
		return rf.Spec.Provisioning != nil
	})
	if ferr != nil {
		return nil, fmt.Errorf("reading ResourceFlavors of workload %s/%s: %w", wl.Namespace, wl.Name, ferr)
	}
	if name == "" {
		ctrl.LoggerFrom(ctx).Info("no flavor of the admission has a provisioning policy", "workload", wl.Name)
		return nil, nil
	}
	if rf, ok := flavors[name]; ok {
		return rf, nil
	}
	rf := &berthv1.ResourceFlavor{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, rf); err != nil {
		if apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Info("ResourceFlavor of the booking not found", "workload", wl.Name, "flavor", name)
			return nil, nil
		}
		return nil, fmt.Errorf("reading ResourceFlavor %s: %w", name, err)
	}
	return rf, nil
}

// create makes the attempt's PodTemplates and ProvisioningRequest.
func (r *Reconciler) create(ctx context.Context, wl *berthv1.Workload, rf *berthv1.ResourceFlavor) error {
	pr, templates := BuildRequest(wl, rf)
	for _, t := range templates {
		if err := controllerutil.SetControllerReference(wl, t, r.client.Scheme()); err != nil {
			return fmt.Errorf("owning PodTemplate %s: %w", t.Name, err)
		}
		if err := r.client.Create(ctx, t); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PodTemplate %s/%s: %w", t.Namespace, t.Name, err)
		}
	}
	if err := controllerutil.SetControllerReference(wl, pr, r.client.Scheme()); err != nil {
		return fmt.Errorf("owning ProvisioningRequest %s: %w", pr.Name, err)
	}
	if err := r.client.Create(ctx, pr); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating ProvisioningRequest %s/%s: %w", pr.Namespace, pr.Name, err)
	}
	p := wl.Status.Provisioning
	msg := fmt.Sprintf("waiting for ProvisioningRequest %s (%s) to book capacity in %s, attempt %d of %d",
		pr.Name, p.ClassName, DomainString(p.Topology), p.Attempt, MaxAttempts(rf.Spec.Provisioning))
	r.recorder.Eventf(wl, nil, corev1.EventTypeNormal, EventRequestCreated, "Provision", "%s", msg)
	// The API-missing message, if any, no longer holds.
	_, err := workloadstatus.Patch(ctx, r.client, r.reader, wl, func(w *berthv1.Workload) bool {
		c := meta.FindStatusCondition(w.Status.Conditions, berthv1.ConditionAdmitted)
		if c == nil || c.Status != metav1.ConditionFalse || c.Message != APIMissingMessage {
			return false
		}
		return SetCondition(w, berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonWaitingForCapacity, msg, r.clock.Now())
	})
	return err
}

// cleanUp deletes the workload's requests and their PodTemplates, except
// the current one while it is live.
func (r *Reconciler) cleanUp(ctx context.Context, wl *berthv1.Workload, live bool) error {
	prs := &autoscalingv1.ProvisioningRequestList{}
	if err := r.client.List(ctx, prs, client.InNamespace(wl.Namespace)); err != nil {
		return fmt.Errorf("listing ProvisioningRequests in %s: %w", wl.Namespace, err)
	}
	for i := range prs.Items {
		pr := &prs.Items[i]
		if !metav1.IsControlledBy(pr, wl) || (live && pr.Name == wl.Status.Provisioning.RequestName) || !pr.DeletionTimestamp.IsZero() {
			continue
		}
		for _, ps := range pr.Spec.PodSets {
			t := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: pr.Namespace, Name: ps.PodTemplateRef.Name}}
			if err := r.client.Delete(ctx, t); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting PodTemplate %s/%s: %w", t.Namespace, t.Name, err)
			}
		}
		if err := r.client.Delete(ctx, pr); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ProvisioningRequest %s/%s: %w", pr.Namespace, pr.Name, err)
		}
		ctrl.LoggerFrom(ctx).V(2).Info("deleted ProvisioningRequest", "request", pr.Name)
	}
	return nil
}
