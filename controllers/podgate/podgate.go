// Package podgate owns how queued pods are gated at creation. Where the
// API server serves MutatingAdmissionPolicy (Kubernetes 1.36+) and berth's
// pod-gate policy is installed (config/webhook/pod_gate_policy.yaml), the
// API server gates queued pods in-process; elsewhere berth's pod webhook
// does. The webhook's matchConditions make the two one mechanism without a
// switch: the webhook is called only for a queued pod that arrives
// ungated, so with the policy in place it is never called for the gate,
// and with the policy missing (or deleted) it gates every pod itself, and
// no pod runs ungated in between.
//
// The package detects the path at start (and again every few minutes) for
// the log and the berth_pod_gate metric, and keeps the pod webhook's
// condition what berth's configuration needs: with the gang scheduling
// hand-off on, every queued pod must reach the webhook, which names the
// PodGroup a gated pod joins (spec.schedulingGroup can only be set at
// creation).
package podgate

import (
	"context"
	"fmt"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/controllers/metrics"
)

// Webhook is the name of berth's pod gate webhook in its
// MutatingWebhookConfiguration.
const Webhook = "mpod.berth.dev"

// DefaultPolicyBinding is the MutatingAdmissionPolicyBinding of berth's
// pod-gate policy, as the install names it.
const DefaultPolicyBinding = "berth-pod-gate"

// The parts of the pod webhook's condition, in CEL over the pod being
// created. They are the pod-gate policy's matchConditions too.
const (
	// Queued is a pod that carries the queue-name label.
	Queued = "'berth.dev/queue-name' in object.metadata.?labels.orValue({})"
	// JobPod is a pod a batch Job controls: berth holds the Job itself,
	// through spec.suspend, and never gates its pods.
	JobPod = "object.metadata.?ownerReferences.orValue([]).exists(r, r.kind == 'Job' && " +
		"r.apiVersion.startsWith('batch/') && r.?controller.orValue(false))"
	// Gated is a pod that carries berth's gate already.
	Gated = "object.spec.?schedulingGates.orValue([]).exists(g, g.name == 'berth.dev/admission')"
	// Join is a pod whose berth.dev/scheduling-group label names a
	// PodGroup it has not joined yet.
	Join = "('berth.dev/scheduling-group' in object.metadata.?labels.orValue({}) && !object.spec.?schedulingGroup.hasValue())"
)

// GateCondition is the pod webhook's condition as installed: a pod to
// gate (queued, not a Job's, not gated yet) or a group to join.
const GateCondition = Join + " || (" + Queued + " && !" + JobPod + " && !" + Gated + ")"

// HandOffCondition is the condition with the gang scheduling hand-off on:
// every queued pod that is not a Job's, gated or not, so that the webhook
// names its gang's PodGroup.
const HandOffCondition = Join + " || (" + Queued + " && !" + JobPod + ")"

// conditionName is the name of the webhook's one matchCondition.
const conditionName = "berth-pods"

// Condition is the pod webhook's condition for a berth with the gang
// scheduling hand-off on or off.
func Condition(handOff bool) []admissionv1.MatchCondition {
	expr := GateCondition
	if handOff {
		expr = HandOffCondition
	}
	return []admissionv1.MatchCondition{{Name: conditionName, Expression: expr}}
}

// Options configure the Reconciler.
type Options struct {
	// WebhookConfiguration is the MutatingWebhookConfiguration that holds
	// the pod webhook.
	WebhookConfiguration string
	// PolicyBinding is the MutatingAdmissionPolicyBinding of the pod-gate
	// policy; DefaultPolicyBinding when empty.
	PolicyBinding string
	// HandOff is the gang scheduling hand-off (setup.Options.PodGroups).
	HandOff bool
	// Every is how often the path is detected again; 5 minutes when zero.
	Every time.Duration
}

// Reconciler keeps the pod webhook's condition and reports the path.
type Reconciler struct {
	client  client.Client
	reader  client.Reader
	mapper  meta.RESTMapper
	metrics *metrics.Metrics
	opts    Options
}

// New returns the Reconciler; reader is an uncached reader for the
// policy, which berth does not watch.
func New(c client.Client, reader client.Reader, mapper meta.RESTMapper, m *metrics.Metrics, o Options) *Reconciler {
	if o.PolicyBinding == "" {
		o.PolicyBinding = DefaultPolicyBinding
	}
	if o.Every <= 0 {
		o.Every = 5 * time.Minute
	}
	return &Reconciler{client: c, reader: reader, mapper: mapper, metrics: m, opts: o}
}

// Name names the controller.
func (r *Reconciler) Name() string { return "podgate" }

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings,verbs=get

// Register adds the condition's controller and the path's detection to
// mgr; both run on the leader only.
func (r *Reconciler) Register(_ context.Context, mgr ctrl.Manager) error {
	name := r.opts.WebhookConfiguration
	err := ctrl.NewControllerManagedBy(mgr).Named(r.Name()).
		For(&admissionv1.MutatingWebhookConfiguration{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == name
		}))).Complete(r)
	if err != nil {
		return fmt.Errorf("registering the pod gate controller: %w", err)
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		wait.UntilWithContext(ctx, r.report, r.opts.Every)
		return nil
	}))
}

// Reconcile sets the pod webhook's condition to what berth needs. The
// configuration is re-applied by installs and upgrades (with the condition
// as generated, GateCondition); berth puts its own back.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cfg := &admissionv1.MutatingWebhookConfiguration{}
	if err := r.client.Get(ctx, req.NamespacedName, cfg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	want := Condition(r.opts.HandOff)
	changed := false
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		if w.Name == Webhook && !slices.Equal(w.MatchConditions, want) {
			w.MatchConditions, changed = want, true
		}
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	if err := r.client.Update(ctx, cfg); err != nil {
		return reconcile.Result{}, fmt.Errorf("setting the condition of webhook %s in %s: %w", Webhook, cfg.Name, err)
	}
	log.FromContext(ctx).Info("set the pod webhook's condition", "configuration", cfg.Name, "handOff", r.opts.HandOff)
	return reconcile.Result{}, nil
}

// report detects the path and records it.
func (r *Reconciler) report(ctx context.Context) {
	path, why, err := Detect(ctx, r.mapper, r.reader, r.opts.PolicyBinding)
	if err != nil {
		log.FromContext(ctx).Error(err, "detecting how queued pods are gated")
		return
	}
	r.metrics.SetPodGate(path)
	log.FromContext(ctx).Info("queued pods are gated by the "+path, "why", why)
}

// Detect reports how queued pods are gated: metrics.PodGatePolicy when the
// API server serves MutatingAdmissionPolicy and the binding and its policy
// exist, metrics.PodGateWebhook otherwise, with why.
func Detect(ctx context.Context, mapper meta.RESTMapper, reader client.Reader, binding string) (string, string, error) {
	gvk := admissionv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicyBinding")
	if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return metrics.PodGateWebhook, "the API server does not serve " + gvk.GroupVersion().String() + " MutatingAdmissionPolicy", nil
		}
		return "", "", fmt.Errorf("looking up %s: %w", gvk, err)
	}
	b := &admissionv1.MutatingAdmissionPolicyBinding{}
	if err := reader.Get(ctx, client.ObjectKey{Name: binding}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return metrics.PodGateWebhook, fmt.Sprintf("MutatingAdmissionPolicyBinding %s is not installed", binding), nil
		}
		return "", "", fmt.Errorf("reading MutatingAdmissionPolicyBinding %s: %w", binding, err)
	}
	p := &admissionv1.MutatingAdmissionPolicy{}
	if err := reader.Get(ctx, client.ObjectKey{Name: b.Spec.PolicyName}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return metrics.PodGateWebhook, fmt.Sprintf("MutatingAdmissionPolicy %s, which binding %s names, is not installed", b.Spec.PolicyName, binding), nil
		}
		return "", "", fmt.Errorf("reading MutatingAdmissionPolicy %s: %w", b.Spec.PolicyName, err)
	}
	return metrics.PodGatePolicy, fmt.Sprintf("MutatingAdmissionPolicy %s is bound by %s", p.Name, binding), nil
}
