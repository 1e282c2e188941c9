package notify

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// +kubebuilder:rbac:groups=berth.dev,resources=notificationpolicies;clusternotificationpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=berth.dev,resources=notificationpolicies/status;clusternotificationpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// reread is how often a policy's Secret is read again, so a rotated URL is
// used without editing the policy (berth does not watch Secrets: it may
// read only those it was granted, one by one); retry is how soon a policy
// that is not Ready is looked at again, so that granting berth the Secret,
// creating it, or deleting an older policy that kept this one beyond its
// namespace's cap, is noticed without touching the policy.
const (
	reread = 10 * time.Minute
	retry  = 20 * time.Second
)

// DefaultPoliciesPerNamespace is how many NotificationPolicies of one
// namespace berth uses unless told otherwise.
const DefaultPoliciesPerNamespace = 20

// PolicyOptions configure a PolicyReconciler.
type PolicyOptions struct {
	// Namespace is berth's own, where ClusterNotificationPolicies' Secrets
	// are.
	Namespace string
	// HTTPClient posts to the sinks; it must keep the egress rules (see
	// Egress.Client).
	HTTPClient *http.Client
	// Egress checks the sinks' URLs: Slack hosts, and IP addresses named in
	// them.
	Egress *Egress
	// PerNamespace caps the NotificationPolicies used per namespace (0:
	// DefaultPoliciesPerNamespace).
	PerNamespace int
}

// PolicyReconciler keeps the Notifier's policies in step with the
// NotificationPolicy and ClusterNotificationPolicy objects, reads each
// sink's URL from its Secret, and says in the policy's conditions whether
// the sink can be used and, if not, what to do (Ready), and how its last
// report's delivery ended (Delivered).
type PolicyReconciler struct {
	client PolicyStore
	// secrets reads Secrets straight from the API server: berth may get
	// only the Secrets it was granted, so it cannot list or watch them.
	secrets  client.Reader
	policies Policies
	// outcomes tells the controllers which policies' deliveries ended
	// differently; nil in unit tests, which call the reconcile functions.
	outcomes *outcomes
	recorder events.EventRecorder
	opts     PolicyOptions
}

// PolicyStore is what the policy reconciler reads and writes through the
// cached client: the policies of both kinds and their status. The
// manager's client implements it.
type PolicyStore interface {
	client.Reader
	Status() client.SubResourceWriter
}

// Policies is the part of the Notifier the reconciler keeps in step;
// *Notifier implements it.
type Policies interface {
	// SetPolicy uses p with sink, or stops using it when sink is nil.
	SetPolicy(p Policy, sink Sink)
	// Outcome is how the last delivery of a policy's report ended.
	Outcome(policy string) (DeliveryOutcome, bool)
}

// NewPolicyReconciler returns the reconciler. A nil Egress means the
// default rules; a nil HTTPClient, a client that keeps them.
func NewPolicyReconciler(c PolicyStore, secrets client.Reader, n *Notifier, recorder events.EventRecorder,
	o PolicyOptions) *PolicyReconciler {
	r := newPolicyReconciler(c, secrets, n, recorder, o)
	r.outcomes = n.outcomes
	return r
}

// newPolicyReconciler is NewPolicyReconciler over any Policies, without
// the outcome channels Register watches.
func newPolicyReconciler(c PolicyStore, secrets client.Reader, p Policies, recorder events.EventRecorder, o PolicyOptions) *PolicyReconciler {
	if o.Egress == nil {
		o.Egress = NewEgress(EgressOptions{})
	}
	if o.HTTPClient == nil {
		o.HTTPClient = o.Egress.Client(10 * time.Second)
	}
	o.PerNamespace = cmp.Or(o.PerNamespace, DefaultPoliciesPerNamespace)
	return &PolicyReconciler{client: c, secrets: secrets, policies: p, recorder: recorder, opts: o}
}

// Name implements setup.Reconciler.
func (*PolicyReconciler) Name() string { return "notificationpolicy" }

// Register adds a controller for each policy kind. Each also runs when
// the outcome of its policies' deliveries changes, to write Delivered.
func (r *PolicyReconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).Named("notificationpolicy").For(&berthv1.NotificationPolicy{}).
		WatchesRawSource(source.Channel(r.outcomes.namespaced, &handler.EnqueueRequestForObject{})).
		Complete(reconcile.Func(r.reconcileNamespaced)); err != nil {
		return fmt.Errorf("registering the NotificationPolicy controller: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("clusternotificationpolicy").For(&berthv1.ClusterNotificationPolicy{}).
		WatchesRawSource(source.Channel(r.outcomes.cluster, &handler.EnqueueRequestForObject{})).
		Complete(reconcile.Func(r.reconcileCluster)); err != nil {
		return fmt.Errorf("registering the ClusterNotificationPolicy controller: %w", err)
	}
	return nil
}

func (r *PolicyReconciler) reconcileNamespaced(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.Namespace + "/" + req.Name
	np := &berthv1.NotificationPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, np); err != nil {
		r.policies.SetPolicy(Policy{Key: key}, nil)
		if client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("reading NotificationPolicy %s: %w", key, err)
		}
		return reconcile.Result{}, nil
	}
	list := &berthv1.NotificationPolicyList{}
	if err := r.client.List(ctx, list, client.InNamespace(np.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the NotificationPolicies of %s: %w", np.Namespace, err)
	}
	beyond := PoliciesBeyondCap(list.Items, r.opts.PerNamespace)
	for _, name := range beyond {
		// A policy created in the same second as the last one used may
		// sort before it and push it out: it stops now, and says so when
		// it is reconciled.
		r.policies.SetPolicy(Policy{Key: np.Namespace + "/" + name}, nil)
	}
	p := Policy{Key: key, Namespace: np.Namespace, Settings: np.Spec.NotificationSettings, LocalQueues: np.Spec.LocalQueues}
	if slices.Contains(beyond, np.Name) {
		return r.write(ctx, np, &np.Status, p, nil, berthv1.ReasonTooManyPolicies, fmt.Sprintf(
			"namespace %s has more than %d NotificationPolicies and berth uses only the %d oldest (by creation time, then name): "+
				"this one is not used; delete a policy the namespace no longer needs, or ask an admin to raise --notification-policies-per-namespace",
			np.Namespace, r.opts.PerNamespace, r.opts.PerNamespace))
	}
	sink, reason, msg := r.sink(ctx, p.Settings.Sink, np.Namespace)
	return r.write(ctx, np, &np.Status, p, sink, reason, msg)
}

// PoliciesBeyondCap are the names of the policies beyond the first limit,
// oldest first: by creation time, then name (unique in a namespace), so
// every reconcile agrees on which are used.
func PoliciesBeyondCap(items []berthv1.NotificationPolicy, limit int) []string {
	if len(items) <= limit {
		return nil
	}
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b berthv1.NotificationPolicy) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	var out []string
	for _, p := range sorted[limit:] {
		out = append(out, p.Name)
	}
	return out
}

func (r *PolicyReconciler) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cnp := &berthv1.ClusterNotificationPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, cnp); err != nil {
		r.policies.SetPolicy(Policy{Key: req.Name}, nil)
		if client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("reading ClusterNotificationPolicy %s: %w", req.Name, err)
		}
		return reconcile.Result{}, nil
	}
	p := Policy{Key: req.Name, Settings: cnp.Spec.NotificationSettings, ClusterQueues: cnp.Spec.ClusterQueues}
	if s := cnp.Spec.NamespaceSelector; s != nil {
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			// The API server validated the selector; a bad one would not
			// get here.
			return reconcile.Result{}, fmt.Errorf("namespaceSelector of %s: %w", req.Name, err)
		}
		p.Namespaces = sel
	} else {
		p.Namespaces = labels.Everything()
	}
	sink, reason, msg := r.sink(ctx, p.Settings.Sink, r.opts.Namespace)
	return r.write(ctx, cnp, &cnp.Status, p, sink, reason, msg)
}

// warning is an event to record once the status that explains it is
// written.
type warning struct{ reason, msg string }

// write hands the policy and its sink (nil: not used) to the Notifier,
// computes the Ready and Delivered conditions, writes the status once
// when they changed, and then records a Warning event for each condition
// that turned bad.
func (r *PolicyReconciler) write(ctx context.Context, obj client.Object, st *berthv1.NotificationPolicyStatus, p Policy,
	sink Sink, reason, msg string) (reconcile.Result, error) {
	r.policies.SetPolicy(p, sink)
	gen := obj.GetGeneration()
	ready := metav1.Condition{Type: berthv1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: gen}
	after := reread
	if sink == nil {
		ready.Status, after = metav1.ConditionFalse, retry
	}
	var warnings []warning
	changed := meta.SetStatusCondition(&st.Conditions, ready)
	if changed && sink == nil {
		warnings = append(warnings, warning{reason, msg})
	}
	if sink == nil {
		// Nothing is delivered for a policy that is not used.
		changed = meta.RemoveStatusCondition(&st.Conditions, berthv1.ConditionDelivered) || changed
	} else if oc, ok := r.policies.Outcome(p.Key); ok {
		cond := metav1.Condition{Type: berthv1.ConditionDelivered, Status: metav1.ConditionTrue, Reason: oc.Reason,
			Message: oc.Message, ObservedGeneration: gen}
		if !oc.Delivered() {
			cond.Status = metav1.ConditionFalse
		}
		if meta.SetStatusCondition(&st.Conditions, cond) {
			changed = true
			if !oc.Delivered() {
				warnings = append(warnings, warning{oc.Reason, oc.Message})
			}
		}
	}
	if !changed {
		return reconcile.Result{RequeueAfter: after}, nil
	}
	if err := r.client.Status().Update(ctx, obj); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the conditions of %s: %w", p.Key, err)
	}
	for _, w := range warnings {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, w.reason, "Notify", "%s", w.msg)
	}
	return reconcile.Result{RequeueAfter: after}, nil
}
