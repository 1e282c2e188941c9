package headroom

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Resync is how often a policy is looked at without a change: the Demand
// rule forgets scale-ups as they leave its window, and headroom nodes and
// pools come and go.
const Resync = time.Minute

// ConditionReady is a HeadroomPolicy's condition: whether its headroom is
// kept, and if not, why.
const ConditionReady = "Ready"

// The headroom controller reads policies and their targets, writes the
// policies' status, and keeps the PodTemplates and CapacityBuffers that
// hold their headroom (it creates and deletes only those it owns).
// +kubebuilder:rbac:groups=berth.dev,resources=headroompolicies,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=berth.dev,resources=headroompolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,namespace=berth-system,resources=deployments,verbs=create;update;delete
// +kubebuilder:rbac:groups=berth.dev,resources=headroompolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// targetIndex indexes policies by the target they name (Kind/name),
// queueIndex by their target's ClusterQueue, as last seen.
const (
	targetIndex = "spec.targetRef"
	queueIndex  = "status.clusterQueue"
)

// Reconciler keeps each HeadroomPolicy's headroom: it sizes it from the
// target's replicas and history, places it over the ClusterQueue's
// headroom domains, and keeps one CapacityBuffer per domain and pod shape.
// It writes the policy's status; it is the only writer of it.
type Reconciler struct {
	client  client.Client
	reader  client.Reader
	clock   clock.PassiveClock
	opts    Options
	metrics Recorder
	// buffers says the API server serves CapacityBuffers
	// (autoscaling.x-k8s.io/v1beta1), found at Register.
	buffers bool
}

// Options configure the headroom controller.
type Options struct {
	// Namespace is berth's own, where placeholder pods run; berth-system
	// when empty.
	Namespace string
	// PlaceholderImage is the image placeholder pods run (a pause image).
	PlaceholderImage string
	// PriorityClass is the placeholders' PriorityClass: below every
	// workload's, and not below cluster-autoscaler's expendable-pods cutoff
	// (-10), or the autoscaler would not scale up for them.
	PriorityClass string
	// Mechanism is how headroom is kept: MechanismAuto (CapacityBuffers
	// where the API server serves them, placeholders elsewhere),
	// MechanismCapacityBuffer or MechanismPlaceholder.
	Mechanism string
}

// The values of Options.Mechanism (--headroom-mechanism).
const (
	MechanismAuto           = "auto"
	MechanismCapacityBuffer = "capacitybuffer"
	MechanismPlaceholder    = "placeholder"
)

// DefaultPlaceholderImage is the pause image placeholders run unless
// --headroom-placeholder-image says otherwise.
const DefaultPlaceholderImage = "registry.k8s.io/pause:3.10"

// DefaultNamespace is where placeholders run unless Options.Namespace
// says otherwise: the namespace of berth's install.
const DefaultNamespace = "berth-system"

// DefaultPriorityClass is the PriorityClass berth's install ships for
// placeholders (value -10).
const DefaultPriorityClass = "berth-headroom"

// Recorder records the headroom series (metrics.Metrics).
type Recorder interface {
	SetHeadroom(namespace, policy, clusterQueue, domain string, kept, available, taken int32)
	ForgetHeadroom(namespace, policy string)
}

// New returns a Reconciler that writes with c, lists what it owns with
// reader (an uncached reader: berth caches no PodTemplate) and records
// its series with m (nil records none).
func New(c client.Client, reader client.Reader, clk clock.PassiveClock, m Recorder, o Options) *Reconciler {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Reconciler{client: c, reader: reader, clock: clk, opts: o.Defaulted(), metrics: m}
}

// Defaulted returns o with its empty fields set to their defaults.
func (o Options) Defaulted() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.PlaceholderImage == "" {
		o.PlaceholderImage = DefaultPlaceholderImage
	}
	if o.PriorityClass == "" {
		o.PriorityClass = DefaultPriorityClass
	}
	return o
}

// Name implements setup.Reconciler.
func (r *Reconciler) Name() string { return "headroom" }

// Register adds the reconciler to mgr: it watches policies, their targets
// and, when the API server serves them, their CapacityBuffers.
func (r *Reconciler) Register(ctx context.Context, mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &berthv1.HeadroomPolicy{}, targetIndex, func(o client.Object) []string {
		ref := o.(*berthv1.HeadroomPolicy).Spec.TargetRef
		return []string{ref.Kind + "/" + ref.Name}
	})
	if err != nil {
		return fmt.Errorf("indexing HeadroomPolicies by target: %w", err)
	}
	err = mgr.GetFieldIndexer().IndexField(ctx, &berthv1.HeadroomPolicy{}, queueIndex, func(o client.Object) []string {
		if q := o.(*berthv1.HeadroomPolicy).Status.ClusterQueue; q != "" {
			return []string{q}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing HeadroomPolicies by ClusterQueue: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("headroom").For(&berthv1.HeadroomPolicy{}).
		Watches(&appsv1.Deployment{}, r.byTarget("Deployment")).
		Watches(&appsv1.StatefulSet{}, r.byTarget("StatefulSet")).
		Watches(&corev1.Node{}, r.byHeadroomNode())
	if served(mgr.GetRESTMapper(), lwsv1.GroupVersion.WithKind("LeaderWorkerSet")) {
		b = b.Watches(&lwsv1.LeaderWorkerSet{}, r.byTarget("LeaderWorkerSet"))
	}
	buffers := served(mgr.GetRESTMapper(), cbv1beta1.GroupVersion.WithKind("CapacityBuffer"))
	switch r.opts.Mechanism {
	case MechanismAuto, "":
		r.buffers = buffers
	case MechanismCapacityBuffer:
		if !buffers {
			return fmt.Errorf("headroom mechanism %s: the API server does not serve CapacityBuffer (autoscaling.x-k8s.io/v1beta1): install cluster-autoscaler's CRD, or use %s", MechanismCapacityBuffer, MechanismPlaceholder)
		}
		r.buffers = true
	case MechanismPlaceholder:
		r.buffers = false
	default:
		return fmt.Errorf("headroom mechanism %q: use %s, %s or %s", r.opts.Mechanism, MechanismAuto, MechanismCapacityBuffer, MechanismPlaceholder)
	}
	if r.buffers {
		b = b.Owns(&cbv1beta1.CapacityBuffer{}, builder.MatchEveryOwner)
	}
	return b.Complete(r)
}

// byTarget enqueues the policies whose target is the changed object.
func (r *Reconciler) byTarget(kind string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list berthv1.HeadroomPolicyList
		if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{targetIndex: kind + "/" + o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing HeadroomPolicies of a target", "kind", kind, "name", o.GetName())
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	})
}

// byHeadroomNode enqueues the policies of the ClusterQueue a changed
// node holds headroom for: a node that joins, goes or changes readiness
// changes what is available.
func (r *Reconciler) byHeadroomNode() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		q := o.GetLabels()[berthv1.HeadroomLabel]
		if q == "" {
			return nil
		}
		var list berthv1.HeadroomPolicyList
		if err := r.client.List(ctx, &list, client.MatchingFields{queueIndex: q}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing HeadroomPolicies of a ClusterQueue", "clusterQueue", q)
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	})
}

// Reconcile keeps one policy's headroom and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var hp berthv1.HeadroomPolicy
	if err := r.client.Get(ctx, req.NamespacedName, &hp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if done, err := r.finalize(ctx, &hp); done || err != nil {
		return reconcile.Result{}, err
	}
	before := hp.Status.DeepCopy()
	kept, err := r.keep(ctx, &hp)
	var waiting errWaiting
	switch {
	case errors.As(err, &waiting):
		hp.Status.Domains, hp.Status.AvailableReplicas = nil, 0
		if r.metrics != nil {
			r.metrics.ForgetHeadroom(hp.Namespace, hp.Name)
		}
		r.setReady(&hp, metav1.ConditionFalse, waiting.reason, waiting.msg)
	case err != nil:
		return reconcile.Result{}, err
	default:
		r.setReady(&hp, metav1.ConditionTrue, "Kept", kept)
	}
	if !equalStatus(before, &hp.Status) {
		if err := r.client.Status().Update(ctx, &hp); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{RequeueAfter: time.Second}, nil // read again: someone else wrote it
			}
			return reconcile.Result{}, fmt.Errorf("writing the status of HeadroomPolicy %s: %w", req.NamespacedName, err)
		}
	}
	return reconcile.Result{RequeueAfter: Resync}, nil
}

// keep sizes and places the policy's headroom and keeps its buffers; it
// returns what the Ready condition says of it.
func (r *Reconciler) keep(ctx context.Context, hp *berthv1.HeadroomPolicy) (string, error) {
	t, err := readTarget(ctx, r.client, hp)
	var missing errNotFound
	if errors.As(err, &missing) {
		return "", errWaiting{"TargetNotFound", missing.msg}
	}
	if err != nil {
		return "", err
	}
	cq, err := clusterQueueOf(ctx, r.client, hp.Namespace, t)
	if err != nil {
		return "", err
	}
	now := r.clock.Now()
	h := observe(hp, t.replicas, now)
	hp.Status.Replicas, hp.Status.ClusterQueue = t.replicas, cq.Name
	hp.Status.DesiredReplicas = sizingPolicy(hp.Spec.Sizing).Size(h, now, t.replicas, admissible(cq, t))
	for _, s := range t.shapes {
		if !tolerates(&s.template.Spec, cq.Name) {
			return "", errWaiting{"ReplicasDoNotTolerate", fmt.Sprintf("the target's %s pods do not tolerate the headroom taint %s=%s:NoSchedule, so they could never use the headroom: add the toleration to their template",
				s.role, berthv1.HeadroomLabel, cq.Name)}
		}
	}
	domains, err := headroomDomains(ctx, r.client, cq.Name, t.level)
	if err != nil {
		return "", err
	}
	if len(domains) == 0 {
		return "", errWaiting{"NoHeadroomNodes", noNodesMessage(cq.Name, t.level)}
	}
	before := hp.Status.Domains
	hp.Status.Domains = spread(hp.Status.DesiredReplicas, domains)
	want := desiredBuffers(hp, t, cq.Name, hp.Status.Domains)
	how := "CapacityBuffers"
	if r.buffers {
		hp.Status.Mechanism = berthv1.HeadroomByCapacityBuffer
		err = r.applyBuffers(ctx, hp, want)
		if err == nil {
			// Placeholders kept before cluster-autoscaler served buffers go.
			err = r.deletePlaceholders(ctx, hp, nil)
		}
	} else {
		hp.Status.Mechanism, how = HeadroomByPlaceholder, "placeholder pods"
		err = r.applyPlaceholders(ctx, hp, want)
	}
	if err != nil && !apierrors.IsConflict(err) {
		// Said on the policy, and tried again at the next look: a
		// missing namespace or a refused write does not mend itself
		// through backoff alone. A conflict is retried at once.
		return "", errWaiting{"KeepFailed", err.Error()}
	}
	if err != nil {
		return "", err
	}
	if err := r.measure(ctx, hp, t, before); err != nil {
		return "", err
	}
	return keptMessage(hp.Status.DesiredReplicas, hp.Status.Domains, t.level, how), nil
}

// finalize deletes a deleted policy's placeholders and lets it go, or
// makes sure a live one has the finalizer that will; done says the
// policy is gone or going and nothing else is to be done.
func (r *Reconciler) finalize(ctx context.Context, hp *berthv1.HeadroomPolicy) (bool, error) {
	if hp.DeletionTimestamp.IsZero() {
		if controllerutil.AddFinalizer(hp, Finalizer) {
			if err := r.client.Update(ctx, hp); err != nil {
				return true, fmt.Errorf("adding the finalizer of HeadroomPolicy %s/%s: %w", hp.Namespace, hp.Name, err)
			}
		}
		return false, nil
	}
	if err := r.deletePlaceholders(ctx, hp, nil); err != nil {
		return true, err
	}
	if r.metrics != nil {
		r.metrics.ForgetHeadroom(hp.Namespace, hp.Name)
	}
	if controllerutil.RemoveFinalizer(hp, Finalizer) {
		if err := r.client.Update(ctx, hp); err != nil {
			return true, client.IgnoreNotFound(err)
		}
	}
	return true, nil
}

// noNodesMessage says how to give a ClusterQueue headroom nodes.
func noNodesMessage(clusterQueue, level string) string {
	msg := fmt.Sprintf("no node or CapacityPool is labelled %s=%s", berthv1.HeadroomLabel, clusterQueue)
	if level != "" {
		msg += " with a " + level + " label"
	}
	return msg + fmt.Sprintf(": label and taint (%s=%s:NoSchedule) the nodes, or the CapacityPools' nodeTemplate, that keep this queue's headroom", berthv1.HeadroomLabel, clusterQueue)
}

// keptMessage is the Ready condition's message for kept headroom.
func keptMessage(size int32, domains []berthv1.HeadroomDomain, level, how string) string {
	if size == 0 {
		return "the sizing keeps no headroom now"
	}
	parts := make([]string, 0, len(domains))
	for _, d := range domains {
		if level == "" {
			parts = append(parts, fmt.Sprintf("%d", d.Replicas))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d in %s=%s", d.Replicas, level, d.Name))
	}
	return fmt.Sprintf("%d replicas' worth kept as %s: %s", size, how, strings.Join(parts, ", "))
}

// setReady sets the policy's Ready condition.
func (r *Reconciler) setReady(hp *berthv1.HeadroomPolicy, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&hp.Status.Conditions, metav1.Condition{Type: ConditionReady, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: hp.Generation, LastTransitionTime: metav1.NewTime(r.clock.Now())})
}

// served says whether the API server serves gvk (found through mgr's
// REST mapper, which asks discovery).
func served(m meta.RESTMapper, gvk schema.GroupVersionKind) bool {
	_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

// equalStatus says whether a and b say the same: no write is needed.
func equalStatus(a, b *berthv1.HeadroomPolicyStatus) bool { return equality.Semantic.DeepEqual(a, b) }
