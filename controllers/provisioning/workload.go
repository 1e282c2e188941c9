package provisioning

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/flavors"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/lifecycle/persist"
)

// flavorRetry is how long a booking waits for a missing ResourceFlavor.
const flavorRetry = 10 * time.Second

// Reporter takes what the autoscaler answered about a workload's booking;
// the scheduler implements it and the admission engine decides.
type Reporter interface {
	ReportBooking(key admission.WorkloadKey, r admission.BookingReport)
}

// Reconciler carries out the capacity bookings of Workloads.
type Reconciler struct {
	client   Store
	reader   client.Reader
	recorder events.EventRecorder
	writer   persist.Writer
	clock    clock.PassiveClock
	state    Availability
	reporter Reporter
}

// NewReconciler returns the Workload reconciler; reader is an uncached
// reader (pods, and Workloads after a write conflict).
func NewReconciler(c Store, reader client.Reader, recorder events.EventRecorder, clk clock.PassiveClock, state Availability, reporter Reporter) *Reconciler {
	return &Reconciler{client: c, reader: reader, recorder: recorder, clock: clk, state: state, reporter: reporter,
		writer: persist.Writer{Client: c, Reader: reader, Clock: clk}}
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

// Reconcile carries one Workload's booking on: it creates the attempt's
// PodTemplates and request, reports the autoscaler's answers to the engine,
// checks a started gang's pods at its deadline, and deletes the requests no
// booking needs any more. It decides nothing: the engine does.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wl := &berthv1.Workload{}
	err := r.client.Get(ctx, req.NamespacedName, wl)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading workload %s: %w", req, err)
	}
	p := wl.Status.Provisioning
	phase := lifecycle.PhaseOf(wl)
	if p == nil || !wl.DeletionTimestamp.IsZero() || phase == lifecycle.Finished {
		return reconcile.Result{}, nil // owner references delete the requests
	}
	booking := phase == lifecycle.Reserved
	started := lifecycle.MayRun(phase) && p.State == berthv1.ProvisioningProvisioned
	if !r.state.Available() {
		if booking {
			return reconcile.Result{}, r.note(ctx, wl, nil, APIMissingMessage)
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
	case !metav1.IsControlledBy(pr, wl) && ownedByNamesake(pr, wl):
		// A request of a deleted Workload of the same name, which the
		// garbage collector removes.
		return reconcile.Result{RequeueAfter: flavorRetry}, nil
	case !metav1.IsControlledBy(pr, wl):
		r.squatted(wl, pr, "ProvisioningRequest", booking)
		return reconcile.Result{}, nil
	}
	if booking {
		return reconcile.Result{}, r.report(ctx, wl, pr)
	}
	if pr != nil {
		if err := r.reportStarted(ctx, wl, pr); err != nil {
			return reconcile.Result{}, err
		}
	}
	return r.checkPodsReady(ctx, wl, rf)
}

// ownedByNamesake reports whether pr is controlled by a Workload of wl's
// name (an earlier one, deleted and created again).
func ownedByNamesake(pr *autoscalingv1.ProvisioningRequest, wl *berthv1.Workload) bool {
	ref := metav1.GetControllerOf(pr)
	return ref != nil && ref.Kind == "Workload" && ref.Name == wl.Name
}

// squatted handles a request of the attempt's name that berth did not
// create (a tenant created it first; berth names requests
// deterministically). Its answers are not the autoscaler's to berth, so
// they are never read: the attempt fails, with a Warning event that says
// what to delete, and the engine's next attempt uses another name.
//
// A PodTemplate of the attempt's name that berth did not create is handled
// the same way (kind "PodTemplate"): the autoscaler simulates the pods the
// template describes, so a template planted under the name berth will use
// would have it buy what the planter chose.
func (r *Reconciler) squatted(wl *berthv1.Workload, obj client.Object, kind string, booking bool) {
	msg := fmt.Sprintf("%s %s/%s exists and was not created by berth for this workload; berth ignores it: delete it, "+
		"and do not create %ss named after berth's workloads", kind, obj.GetNamespace(), obj.GetName(), kind)
	r.recorder.Eventf(wl, obj, corev1.EventTypeWarning, lifecycle.EventRequestSquatted, "Provision", "%s", msg)
	if !booking {
		return
	}
	r.reporter.ReportBooking(admission.WorkloadKey{Namespace: wl.Namespace, Name: wl.Name},
		admission.BookingReport{Attempt: wl.Status.Provisioning.Attempt, Answer: admission.AnswerFailed, Message: msg})
}

// report tells the engine the answer to a booking in flight, and records
// on the Workload the first time the autoscaler found no capacity, with
// its words.
func (r *Reconciler) report(ctx context.Context, wl *berthv1.Workload, pr *autoscalingv1.ProvisioningRequest) error {
	now := r.clock.Now()
	rep := lifecycle.Report(wl, pr, now)
	if rep.Answer == admission.AnswerCapacityNotFound {
		since := metav1.NewTime(time.Unix(0, rep.Since))
		msg := fmt.Sprintf("the autoscaler found no capacity for %s in %s since %s and retries; berth tries another domain if none is found within the flavor's capacityNotFoundSeconds: %s",
			pr.Name, lifecycle.DomainString(wl.Status.Provisioning.Topology), since.UTC().Format(time.RFC3339), rep.Message)
		if err := r.note(ctx, wl, &since, msg); err != nil {
			return err
		}
	}
	if pool := lifecycle.NewNodePool(wl.Status.Admission); rep.Answer == admission.AnswerProvisioned && pool != "" {
		// The engine starts the gang once the node joined; until then the
		// Workload says what it waits for.
		msg := fmt.Sprintf("ProvisioningRequest %s is provisioned; the gang must fit one node and starts once the new node of CapacityPool %s joined and holds it, its pods pinned to that node: %s",
			pr.Name, pool, rep.Message)
		if err := r.note(ctx, wl, nil, msg); err != nil {
			return err
		}
	}
	r.reporter.ReportBooking(admission.WorkloadKey{Namespace: wl.Namespace, Name: wl.Name}, rep)
	return nil
}

// reportStarted tells the engine what happened to the booking of a gang
// that started on it: revoked, or expired — before or after its pods used
// it.
func (r *Reconciler) reportStarted(ctx context.Context, wl *berthv1.Workload, pr *autoscalingv1.ProvisioningRequest) error {
	rep := lifecycle.Report(wl, pr, r.clock.Now())
	switch rep.Answer {
	case admission.AnswerRevoked:
	case admission.AnswerExpired:
		consumed, err := r.consumed(ctx, wl)
		if err != nil {
			return err
		}
		rep.Consumed = consumed
	default:
		return nil
	}
	r.reporter.ReportBooking(admission.WorkloadKey{Namespace: wl.Namespace, Name: wl.Name}, rep)
	return nil
}

// note records what a booking waits for on the Workload.
func (r *Reconciler) note(ctx context.Context, wl *berthv1.Workload, notFoundSince *metav1.Time, msg string) error {
	_, err := r.writer.Write(ctx, wl, lifecycle.NoteBooking{Attempt: wl.Status.Provisioning.Attempt, CapacityNotFoundSince: notFoundSince, Message: msg})
	return err
}

// flavor returns the flavor the booking is for (the engine chose it); nil
// when it does not exist.
func (r *Reconciler) flavor(ctx context.Context, wl *berthv1.Workload) (*berthv1.ResourceFlavor, error) {
	name := wl.Status.Provisioning.Flavor
	rf, ok, err := flavors.New(r.client).Get(ctx, name)
	if err == nil && !ok {
		ctrl.LoggerFrom(ctx).Info("ResourceFlavor of the booking not found", "workload", wl.Name, "flavor", name)
	}
	return rf, err
}

// create makes the attempt's PodTemplates, then its ProvisioningRequest:
// cluster-autoscaler fails a request whose templates it cannot find.
func (r *Reconciler) create(ctx context.Context, wl *berthv1.Workload, rf *berthv1.ResourceFlavor) error {
	pr, templates := BuildRequest(wl, rf)
	for _, t := range templates {
		if err := controllerutil.SetControllerReference(wl, t, r.client.Scheme()); err != nil {
			return fmt.Errorf("owning PodTemplate %s: %w", t.Name, err)
		}
		err := r.client.Create(ctx, t)
		if apierrors.IsAlreadyExists(err) {
			// Ours from an earlier reconcile, or planted: read whose.
			err = r.client.Get(ctx, client.ObjectKeyFromObject(t), t)
			if err == nil && !metav1.IsControlledBy(t, wl) {
				r.squatted(wl, t, "PodTemplate", true)
				return nil
			}
		}
		if err != nil {
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
	msg := fmt.Sprintf("waiting for ProvisioningRequest %s (%s) to book capacity in %s, attempt %d", pr.Name, p.ClassName,
		lifecycle.DomainString(p.Topology), p.Attempt)
	r.recorder.Eventf(wl, nil, corev1.EventTypeNormal, lifecycle.EventRequestCreated, "Provision", "%s", msg)
	// The request has no answer yet: the engine times it from now.
	r.reporter.ReportBooking(admission.WorkloadKey{Namespace: wl.Namespace, Name: wl.Name},
		admission.BookingReport{Attempt: p.Attempt, Answer: admission.AnswerNone, Since: pr.CreationTimestamp.UnixNano()})
	if apiMissingNoted(p) {
		// The API-missing message no longer holds.
		return r.note(ctx, wl, nil, msg)
	}
	return nil
}

// apiMissingNoted reports whether the booking's message is the one that
// says the API is not served. It is a prefix: NoteBooking appends a note
// to the messages of bookings that name no topology domain.
func apiMissingNoted(p *berthv1.ProvisioningStatus) bool {
	return strings.HasPrefix(p.Message, APIMissingMessage)
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
