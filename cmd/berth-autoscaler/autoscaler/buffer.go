package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
)

// BufferReconciler is the CapacityBuffer controller
// (Options.CapacityBufferController), as cluster-autoscaler's
// (capacitybuffer/controller/controller.go): per namespace, it resolves
// each active-capacity buffer's pod template and replica count, caps the
// counts by the namespace's ResourceQuotas, and writes them to the
// buffers' status for the pod injection to act on.
type BufferReconciler struct {
	// Client reads buffers, templates, scalable objects and quotas from the
	// cache and writes managed PodTemplates and buffer status.
	Client client.Client
	// Clock stamps condition transitions.
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;replicasets,verbs=get;list;watch

// Register adds the controller to mgr. Work is keyed by namespace, as in
// cluster-autoscaler, because quotas are shared by a namespace's buffers:
// a change to a buffer, to a PodTemplate or scalable object a buffer
// names, or to a ResourceQuota of a namespace with buffers reconciles the
// namespace.
func (r *BufferReconciler) Register(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	ns := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}}
	})
	generation := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).
		Named("capacitybuffer").
		Watches(&cbv1beta1.CapacityBuffer{}, ns, generation).
		// Not only generation: an API server that does not count a
		// PodTemplate's generation must still refresh the buffers.
		Watches(&corev1.PodTemplate{}, r.onReferenced("", "PodTemplate")).
		Watches(&appsv1.Deployment{}, r.onReferenced(appsv1.GroupName, "Deployment"), generation).
		Watches(&appsv1.StatefulSet{}, r.onReferenced(appsv1.GroupName, "StatefulSet"), generation).
		Watches(&appsv1.ReplicaSet{}, r.onReferenced(appsv1.GroupName, "ReplicaSet"), generation).
		Watches(&corev1.ResourceQuota{}, r.onReferenced("", "ResourceQuota")).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}

// onReferenced enqueues the namespace of an object of kind when a buffer
// there uses it; a ResourceQuota is used by every buffer of its namespace.
func (r *BufferReconciler) onReferenced(group, kind string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &cbv1beta1.CapacityBufferList{}
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		for i := range list.Items {
			if uses(&list.Items[i], group, kind, o.GetName()) {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}}
			}
		}
		return nil
	})
}

// uses reports whether buffer b depends on the object group/kind/name of
// its namespace.
func uses(b *cbv1beta1.CapacityBuffer, group, kind, name string) bool {
	switch kind {
	case "ResourceQuota":
		return true
	case "PodTemplate":
		return (b.Spec.PodTemplateRef != nil && b.Spec.PodTemplateRef.Name == name) ||
			(b.Status.PodTemplateRef != nil && b.Status.PodTemplateRef.Name == name) ||
			name == ManagedTemplateName(b.Name)
	}
	s := b.Spec.ScalableRef
	return s != nil && s.APIGroup == group && s.Kind == kind && s.Name == name
}

// ManagedTemplateName is the PodTemplate the controller keeps for a
// scalableRef buffer, cluster-autoscaler's name: the buffer's name cut so
// the whole fits a name's 253 characters.
func ManagedTemplateName(buffer string) string {
	const prefix, suffix = "capacitybuffer-", "-pod-template"
	if n := 253 - len(prefix) - len(suffix); len(buffer) > n {
		buffer = buffer[:n]
	}
	return prefix + buffer + "-pod-template"
}

// Active reports whether a buffer's provisioning strategy is the one the
// autoscaler serves: buffer.x-k8s.io/active-capacity, or none (the
// default).
func Active(strategy *string) bool {
	return strategy == nil || *strategy == "" || *strategy == cbv1beta1.ActiveCapacity
}

// resolved is what the controller found for one buffer.
type resolved struct {
	// template is the PodTemplate the status names; replicas the count
	// before quotas.
	template *corev1.PodTemplate
	replicas int32
	// err, when set, is the user's to fix; it goes to the status.
	err error
}

// fixable marks an error the buffer's owner must fix; any other error is
// the API server's and is retried.
type fixable struct{ error }

func fix(format string, args ...any) error { return fixable{fmt.Errorf(format, args...)} }

// Reconcile resolves, sizes and caps every active-capacity buffer of the
// namespace, oldest first, and writes their status.
func (r *BufferReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	list := &cbv1beta1.CapacityBufferList{}
	if err := r.Client.List(ctx, list, client.InNamespace(req.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing CapacityBuffers of %s: %w", req.Namespace, err)
	}
	var buffers []*cbv1beta1.CapacityBuffer
	for i := range list.Items {
		if b := &list.Items[i]; Active(b.Spec.ProvisioningStrategy) && b.DeletionTimestamp.IsZero() {
			buffers = append(buffers, b)
		}
	}
	SortBuffers(buffers)
	results := make([]resolved, len(buffers))
	for i, b := range buffers {
		res, err := r.resolve(ctx, b)
		if err != nil {
			return reconcile.Result{}, err
		}
		results[i] = res
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := r.Client.List(ctx, quotas, client.InNamespace(req.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing ResourceQuotas of %s: %w", req.Namespace, err)
	}
	capped := capResolved(results, quotas.Items)
	var errs []error
	for i, b := range buffers {
		if err := r.writeStatus(ctx, b, results[i], capped[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// SortBuffers orders buffers as cluster-autoscaler allocates quotas and
// the pod injection fits them: oldest first, then by namespace and name.
func SortBuffers(buffers []*cbv1beta1.CapacityBuffer) {
	slices.SortStableFunc(buffers, func(a, b *cbv1beta1.CapacityBuffer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// capResolved runs the quota allocation over the buffers that resolved
// and whose pod requests something; the others get nil.
func capResolved(results []resolved, quotas []corev1.ResourceQuota) []*QuotaResult {
	var in []QuotaBuffer
	var at []int
	for i, res := range results {
		if res.err != nil {
			continue
		}
		reqs := PodRequests(&res.template.Template.Spec)
		if !requestsAny(reqs) {
			continue
		}
		in = append(in, QuotaBuffer{Replicas: res.replicas, Requests: reqs, Spec: &res.template.Template.Spec})
		at = append(at, i)
	}
	out := make([]*QuotaResult, len(results))
	for k, q := range CapByQuotas(in, quotas) {
		out[at[k]] = &q
	}
	return out
}

// requestsAny reports whether some request is above zero.
func requestsAny(reqs corev1.ResourceList) bool {
	for _, q := range reqs {
		if q.Sign() > 0 {
			return true
		}
	}
	return false
}

// resolve finds buffer b's PodTemplate — the one podTemplateRef names, or
// for scalableRef the managed copy of the object's template — and its
// replica count. What the user must fix is in resolved.err; an API error
// is returned.
func (r *BufferReconciler) resolve(ctx context.Context, b *cbv1beta1.CapacityBuffer) (resolved, error) {
	var t *corev1.PodTemplate
	var scalable *int32
	var err error
	switch {
	case b.Spec.PodTemplateRef != nil:
		t, err = r.podTemplate(ctx, b)
	case b.Spec.ScalableRef != nil:
		var tmpl *corev1.PodTemplateSpec
		tmpl, scalable, err = r.scalable(ctx, b)
		if err == nil {
			t, err = r.ensureManaged(ctx, b, tmpl)
		}
	default:
		err = fix("neither spec.podTemplateRef nor spec.scalableRef is set: set one of them")
	}
	if err == nil {
		var n int32
		n, err = BufferReplicas(&b.Spec, PodRequests(&t.Template.Spec), scalable)
		if err != nil {
			err = fixable{err}
		}
		return resolved{template: t, replicas: n, err: err}, nil
	}
	if f := (fixable{}); errors.As(err, &f) {
		return resolved{err: f}, nil
	}
	return resolved{}, err
}

// podTemplate reads the PodTemplate a podTemplateRef buffer names.
func (r *BufferReconciler) podTemplate(ctx context.Context, b *cbv1beta1.CapacityBuffer) (*corev1.PodTemplate, error) {
	t := &corev1.PodTemplate{}
	name := types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.PodTemplateRef.Name}
	err := r.Client.Get(ctx, name, t)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fix("PodTemplate %s named in spec.podTemplateRef does not exist: create it or fix spec.podTemplateRef", name)
	case err != nil:
		return nil, fmt.Errorf("reading PodTemplate %s: %w", name, err)
	}
	return t, nil
}

// scalable reads a scalableRef buffer's object: its pod template and
// spec.replicas (1 when unset, the API's default). Only apps Deployments,
// StatefulSets and ReplicaSets are resolved.
func (r *BufferReconciler) scalable(ctx context.Context, b *cbv1beta1.CapacityBuffer) (*corev1.PodTemplateSpec, *int32, error) {
	ref := b.Spec.ScalableRef
	name := types.NamespacedName{Namespace: b.Namespace, Name: ref.Name}
	var obj client.Object
	var get func() (*corev1.PodTemplateSpec, *int32)
	switch {
	case ref.APIGroup == appsv1.GroupName && ref.Kind == "Deployment":
		d := &appsv1.Deployment{}
		obj, get = d, func() (*corev1.PodTemplateSpec, *int32) { return &d.Spec.Template, d.Spec.Replicas }
	case ref.APIGroup == appsv1.GroupName && ref.Kind == "StatefulSet":
		s := &appsv1.StatefulSet{}
		obj, get = s, func() (*corev1.PodTemplateSpec, *int32) { return &s.Spec.Template, s.Spec.Replicas }
	case ref.APIGroup == appsv1.GroupName && ref.Kind == "ReplicaSet":
		s := &appsv1.ReplicaSet{}
		obj, get = s, func() (*corev1.PodTemplateSpec, *int32) { return &s.Spec.Template, s.Spec.Replicas }
	default:
		return nil, nil, fix("spec.scalableRef kind %q of apiGroup %q is not supported: name an apps Deployment, StatefulSet or ReplicaSet, or use spec.podTemplateRef", ref.Kind, ref.APIGroup)
	}
	err := r.Client.Get(ctx, name, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, fix("%s %s named in spec.scalableRef does not exist: create it or fix spec.scalableRef", ref.Kind, name)
	case err != nil:
		return nil, nil, fmt.Errorf("reading %s %s: %w", ref.Kind, name, err)
	}
	tmpl, replicas := get()
	if replicas == nil {
		replicas = ptrTo(int32(1))
	}
	return tmpl, replicas, nil
}
