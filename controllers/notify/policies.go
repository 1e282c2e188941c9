package notify

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
// or creating it, is noticed without touching the policy.
const (
	reread = 10 * time.Minute
	retry  = 20 * time.Second
)

// PolicyReconciler keeps the Notifier's policies in step with the
// NotificationPolicy and ClusterNotificationPolicy objects, reads each
// sink's URL from its Secret, and says in the policy's Ready condition
// whether the sink can be used and, if not, what to do.
type PolicyReconciler struct {
	client client.Client
	// secrets reads Secrets straight from the API server: berth may get
	// only the Secrets it was granted, so it cannot list or watch them.
	secrets   client.Reader
	notifier  *Notifier
	recorder  events.EventRecorder
	http      *http.Client
	namespace string
}

// NewPolicyReconciler returns the reconciler. namespace is berth's own,
// where ClusterNotificationPolicies' Secrets are; httpClient posts to the
// sinks (nil: a client with a 10 s timeout).
func NewPolicyReconciler(c client.Client, secrets client.Reader, n *Notifier, recorder events.EventRecorder,
	httpClient *http.Client, namespace string) *PolicyReconciler {
	return &PolicyReconciler{client: c, secrets: secrets, notifier: n, recorder: recorder, http: orDefault(httpClient), namespace: namespace}
}

// Name implements setup.Reconciler.
func (*PolicyReconciler) Name() string { return "notificationpolicy" }

// Register adds a controller for each policy kind.
func (r *PolicyReconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).Named("notificationpolicy").For(&berthv1.NotificationPolicy{}).
		Complete(reconcile.Func(r.reconcileNamespaced)); err != nil {
		return fmt.Errorf("registering the NotificationPolicy controller: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("clusternotificationpolicy").For(&berthv1.ClusterNotificationPolicy{}).
		Complete(reconcile.Func(r.reconcileCluster)); err != nil {
		return fmt.Errorf("registering the ClusterNotificationPolicy controller: %w", err)
	}
	return nil
}

func (r *PolicyReconciler) reconcileNamespaced(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.Namespace + "/" + req.Name
	np := &berthv1.NotificationPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, np); err != nil {
		r.notifier.SetPolicy(Policy{Key: key}, nil)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	p := Policy{Key: key, Namespace: np.Namespace, Settings: np.Spec.NotificationSettings, LocalQueues: np.Spec.LocalQueues}
	return r.apply(ctx, np, &np.Status, p, np.Namespace)
}

func (r *PolicyReconciler) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cnp := &berthv1.ClusterNotificationPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, cnp); err != nil {
		r.notifier.SetPolicy(Policy{Key: req.Name}, nil)
		return reconcile.Result{}, client.IgnoreNotFound(err)
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
	return r.apply(ctx, cnp, &cnp.Status, p, r.namespace)
}

// apply builds the policy's sink, hands both to the Notifier and writes
// the Ready condition when it changed.
func (r *PolicyReconciler) apply(ctx context.Context, obj client.Object, st *berthv1.NotificationPolicyStatus, p Policy,
	secretNamespace string) (reconcile.Result, error) {
	sink, reason, msg := r.sink(ctx, p.Settings.Sink, secretNamespace)
	r.notifier.SetPolicy(p, sink)
	cond := metav1.Condition{Type: berthv1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, Message: msg,
		ObservedGeneration: obj.GetGeneration()}
	after := reread
	if sink == nil {
		cond.Status, after = metav1.ConditionFalse, retry
	}
	if meta.SetStatusCondition(&st.Conditions, cond) {
		if sink == nil {
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Notify", "%s", msg)
		}
		if err := r.client.Status().Update(ctx, obj); err != nil {
			return reconcile.Result{}, fmt.Errorf("writing the Ready condition of %s: %w", p.Key, err)
		}
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// sink builds the policy's sink, or says why it cannot.
func (r *PolicyReconciler) sink(ctx context.Context, s berthv1.NotificationSink, ns string) (Sink, string, string) {
	if s.Type == berthv1.SinkEvent {
		return NewEventSink(r.recorder), berthv1.ReasonSinkReady, "reports are recorded as Warning events on the jobs"
	}
	ref := s.URLSecretRef
	if ref == nil {
		return nil, berthv1.ReasonSecretNotReadable, "a Slack or Webhook sink needs urlSecretRef"
	}
	key := ref.Key
	if key == "" {
		key = "url"
	}
	secret := &corev1.Secret{}
	err := r.secrets.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, berthv1.ReasonSecretNotReadable, fmt.Sprintf("Secret %s/%s does not exist: create it with the URL under key %q", ns, ref.Name, key)
	case apierrors.IsForbidden(err):
		return nil, berthv1.ReasonSecretNotReadable, fmt.Sprintf(
			"berth may not read Secret %s/%s: grant it with `kubectl -n %s create role berth-notify --verb=get --resource=secrets --resource-name=%s` "+
				"and `kubectl -n %s create rolebinding berth-notify --role=berth-notify --serviceaccount=<berth's namespace>:<berth's service account>`",
			ns, ref.Name, ns, ref.Name, ns)
	case err != nil:
		return nil, berthv1.ReasonSecretNotReadable, fmt.Sprintf("reading Secret %s/%s: %v", ns, ref.Name, err)
	}
	raw, ok := secret.Data[key]
	if !ok {
		return nil, berthv1.ReasonSecretNotReadable, fmt.Sprintf("Secret %s/%s has no key %q", ns, ref.Name, key)
	}
	u, err := url.Parse(string(raw))
	if err != nil || u.Scheme != "https" || u.Host == "" {
		// Never quote the value: it is a credential.
		return nil, berthv1.ReasonInvalidURL, fmt.Sprintf("key %q of Secret %s/%s is not an https:// URL", key, ns, ref.Name)
	}
	if s.Type == berthv1.SinkSlack {
		return NewSlackSink(u.String(), r.http), berthv1.ReasonSinkReady, "reports are posted to the Slack webhook"
	}
	return NewWebhookSink(u.String(), r.http), berthv1.ReasonSinkReady, "reports are posted to the webhook"
}
