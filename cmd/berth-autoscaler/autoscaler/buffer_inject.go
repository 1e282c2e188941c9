package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// BufferLoop is the autoscaler's loop for pods: the CapacityBuffer pod
// injection (Options.CapacityBufferPodInjection), as cluster-autoscaler's
// (processors/capacitybuffer/pod_list_processor.go), and the scale-up for
// unschedulable pods (Options.ScaleUpUnschedulablePods, pending.go). Once
// per loop the unschedulable pods and each ready buffer's fake pods are
// fitted on free capacity, and those that do not fit make an ordinary
// scale-up. Fake pods are never created in the
// API server, and no capacity is reserved: a real pod that takes the room
// leaves the next loop's fake pods without it, and the loop scales up to
// restore the buffer.
type BufferLoop struct {
	// Requests is the ProvisioningRequest reconciler, whose view, node
	// creation, latency and node group backoffs the loop shares.
	Requests *RequestReconciler
}

// Start runs the loop every Options.ScanInterval (RetryInterval when that
// is 0, so tests on a fake clock see loops) until ctx ends; it needs
// leadership, as every other decision does.
func (l *BufferLoop) Start(ctx context.Context) error {
	period := l.Requests.Options.ScanInterval
	if period <= 0 {
		period = l.Requests.Options.RetryInterval
	}
	t := time.NewTicker(period)
	defer t.Stop()
	logger := log.FromContext(ctx).WithName("podloop")
	for {
		if err := l.Once(log.IntoContext(ctx, logger)); err != nil && ctx.Err() == nil {
			logger.Error(err, "loop for capacity buffers and unschedulable pods")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Once runs one loop: it creates the nodes whose latency has passed —
// buffers' and, with Options.ScaleUpUnschedulablePods, those decided for
// unschedulable pods — then makes one scale-up for the unschedulable pods
// that fit nowhere, then fits every active buffer's fake pods, oldest
// buffer first, each on what the pods and earlier buffers left, and scales
// up for those that do not fit. Real pods come first: a buffer is room
// kept for pods that come later, and is restored around them.
func (l *BufferLoop) Once(ctx context.Context) error {
	r := l.Requests
	r.decisions.Lock()
	defer r.decisions.Unlock()
	now := r.Options.Clock.Now()
	buffers, err := l.activeBuffers(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range buffers {
		if err := l.createDue(ctx, b, now); err != nil {
			errs = append(errs, err)
		}
	}
	candidates, err := l.unschedulablePods(ctx, now)
	if err != nil {
		errs = append(errs, err)
	}
	if len(buffers) == 0 && len(candidates) == 0 {
		return errors.Join(errs...) // no view to read
	}
	v, err := r.view(ctx, now)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	bins := v.Bins("")
	pools := r.backedOff(v.ScalablePools(""), now)
	if pods := placeablePods(candidates, v, r.Options.expendableCutoff()); len(pods) > 0 {
		if err := l.scaleUpPods(ctx, pods, v, bins, pools, now); err != nil {
			errs = append(errs, err)
		}
	}
	for _, b := range buffers {
		if err := l.keep(ctx, b, v, bins, pools, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// activeBuffers are the buffers whose status says active-capacity, oldest
// first; none without Options.CapacityBufferPodInjection, so that their
// CRD need not be installed.
func (l *BufferLoop) activeBuffers(ctx context.Context) ([]*cbv1beta1.CapacityBuffer, error) {
	if !l.Requests.Options.CapacityBufferPodInjection {
		return nil, nil
	}
	list := &cbv1beta1.CapacityBufferList{}
	if err := l.Requests.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing CapacityBuffers: %w", err)
	}
	var buffers []*cbv1beta1.CapacityBuffer
	for i := range list.Items {
		if b := &list.Items[i]; b.Status.ProvisioningStrategy != nil && *b.Status.ProvisioningStrategy == cbv1beta1.ActiveCapacity {
			buffers = append(buffers, b)
		}
	}
	SortBuffers(buffers)
	return buffers, nil
}

// keep fits one buffer's fake pods on bins (consuming their room) and on
// the nodes still coming for it, and scales up one pool for the rest.
func (l *BufferLoop) keep(ctx context.Context, b *cbv1beta1.CapacityBuffer, v *View, bins []*Bin, pools []*Pool, now time.Time) error {
	r := l.Requests
	pods, reason, msg, err := l.fakePods(ctx, b)
	if err != nil {
		return err
	}
	if reason != "" {
		return l.setProvisioning(ctx, b, metav1.ConditionFalse, reason, msg, now)
	}
	if pods == nil {
		return nil // the template changed since the controller looked
	}
	plan := PlaceSome(pods, append(append([]*Bin(nil), bins...), upcoming(b, v)...), pools)
	if err := l.setProvisioning(ctx, b, metav1.ConditionTrue, cbv1beta1.ReasonFakePodsInjected, "", now); err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithValues("buffer", b.Namespace+"/"+b.Name)
	if plan.Chosen != nil && plan.Chosen.OutOfStock {
		// The cloud refused to grow the pool: back it off, as after a
		// request's failed scale-up; the next loop tries another.
		r.backOff(plan.Chosen.Group, now)
		logger.Info("the scale-up for a capacity buffer failed: pool out of stock", "pool", plan.Chosen.Group)
		return nil
	}
	if len(plan.Unplaced) > 0 {
		logger.V(1).Info("capacity buffer fake pods fit nowhere", "pods", len(plan.Unplaced), "why", Shortfall(pods, plan, pools))
	}
	if len(plan.NewNodes) == 0 {
		return nil
	}
	pending := PendingOf(b)
	for _, n := range plan.NewNodes {
		due := now
		for i := range v.Pools {
			if v.Pools[i].Name == n.Pool {
				due = now.Add(r.latency(ctx, &v.Pools[i]))
			}
		}
		pending = append(pending, PendingNode{Pool: n.Pool, Node: n.Name, Due: metav1.NewTime(due)})
	}
	logger.Info("scaling up for a capacity buffer", "pool", plan.NewNodes[0].Pool, "nodes", len(plan.NewNodes))
	// Recorded before any node is created, so a restart carries on and the
	// names and room stay taken.
	if err := setPending(ctx, r.Client, b, bufferName(b), pending); err != nil {
		return err
	}
	return l.createDue(ctx, b, now)
}

// fakePods are buffer b's status.replicas pods of its status PodTemplate.
// When b is not injected, reason and msg are the Provisioning=False
// condition to write; pods and reason are both empty when the template's
// generation moved since the controller wrote the status (cluster-
// autoscaler skips such a buffer until the controller refreshes it).
func (l *BufferLoop) fakePods(ctx context.Context, b *cbv1beta1.CapacityBuffer) (pods []Pod, reason, msg string, err error) {
	st := &b.Status
	ready := apimeta.IsStatusConditionTrue(st.Conditions, cbv1beta1.ConditionReadyForProvisioning) ||
		apimeta.IsStatusConditionTrue(st.Conditions, cbv1beta1.ConditionProvisioning)
	if !ready || st.PodTemplateRef == nil || st.Replicas == nil ||
		apimeta.IsStatusConditionFalse(st.Conditions, cbv1beta1.ConditionReadyForProvisioning) {
		return nil, cbv1beta1.ReasonNotReadyForProvisioning, "CapacityBuffer is not ready for provisioning", nil
	}
	t := &corev1.PodTemplate{}
	name := types.NamespacedName{Namespace: b.Namespace, Name: st.PodTemplateRef.Name}
	found, err := l.Requests.get(ctx, name, t, true)
	if err != nil {
		return nil, "", "", fmt.Errorf("reading PodTemplate %s: %w", name, err)
	}
	if !found {
		return nil, cbv1beta1.ReasonFailedToGetPodTemplate, "PodTemplate " + name.String() + " does not exist", nil
	}
	if st.PodTemplateGeneration == nil || *st.PodTemplateGeneration != t.Generation {
		return nil, "", "", nil
	}
	if *st.Replicas <= 0 {
		return nil, cbv1beta1.ReasonBufferIsEmpty, "CapacityBuffer has zero replicas", nil
	}
	reqs := PodRequests(&t.Template.Spec)
	pods = make([]Pod, *st.Replicas)
	for i := range pods {
		pods[i] = Pod{Spec: &t.Template.Spec, Requests: reqs, Labels: t.Template.Labels}
	}
	return pods, "", "", nil
}

// upcoming are the nodes still coming for buffer b, as bins its fake pods
// may count on (cluster-autoscaler counts a node group's upcoming nodes):
// those decided and not created yet, and those created for it and not
// Ready yet.
func upcoming(b *cbv1beta1.CapacityBuffer, v *View) []*Bin {
	pools := map[string]*berthv1.CapacityPool{}
	for i := range v.Pools {
		pools[v.Pools[i].Name] = &v.Pools[i]
	}
	var out []*Bin
	for _, p := range PendingOf(b) {
		if cp := pools[p.Pool]; cp != nil {
			n := NodeFor(cp, p.Node, "")
			out = append(out, &Bin{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Free: n.Status.Allocatable})
		}
	}
	self := b.Namespace + "/" + b.Name
	for i := range v.Nodes {
		n := &v.Nodes[i]
		if n.Annotations[BufferNodeAnnotation] != self || !joining(n) {
			continue
		}
		out = append(out, &Bin{Name: n.Name, Labels: n.Labels, Taints: lasting(n.Spec.Taints), Free: n.Status.Allocatable.DeepCopy()})
	}
	return out
}

// lasting are the taints a joining node keeps once Ready: not the
// node.kubernetes.io/ condition taints (not-ready, unreachable…) the API
// server and the node lifecycle put on every new node, nor the cloud
// provider's uninitialized taint — as cluster-autoscaler sizes an upcoming
// node from its group's template.
func lasting(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if !strings.HasPrefix(t.Key, "node.kubernetes.io/") && t.Key != "node.cloudprovider.kubernetes.io/uninitialized" {
			out = append(out, t)
		}
	}
	return out
}

// joining reports whether a node exists but is not ready yet (NodeReady):
// not cordoned, not being deleted, and without Ready=True or still with a
// not-ready condition taint.
func joining(n *corev1.Node) bool {
	if n.Spec.Unschedulable || !n.DeletionTimestamp.IsZero() {
		return false
	}
	return !NodeReady(n)
}

// createDue creates buffer b's pending nodes whose latency has passed,
// and records those left; a node whose pool was deleted never comes.
func (l *BufferLoop) createDue(ctx context.Context, b *cbv1beta1.CapacityBuffer, now time.Time) error {
	pending := PendingOf(b)
	var left []PendingNode
	for _, p := range pending {
		if now.Before(p.Due.Time) {
			left = append(left, p)
			continue
		}
		cp := &berthv1.CapacityPool{}
		err := l.Requests.Client.Get(ctx, types.NamespacedName{Name: p.Pool}, cp)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading CapacityPool %s: %w", p.Pool, err)
		}
		node := NodeFor(cp, p.Node, "")
		delete(node.Annotations, CreatedForAnnotation)
		node.Annotations[BufferNodeAnnotation] = b.Namespace + "/" + b.Name
		if err := l.Requests.createNode(ctx, cp, node); err != nil {
			return err
		}
	}
	if len(left) == len(pending) {
		return nil
	}
	return setPending(ctx, l.Requests.Client, b, bufferName(b), left)
}

// setProvisioning writes b's Provisioning condition when it changed.
func (l *BufferLoop) setProvisioning(ctx context.Context, b *cbv1beta1.CapacityBuffer, status metav1.ConditionStatus, reason, msg string, now time.Time) error {
	before := b.DeepCopy()
	if !setBufferCondition(b, cbv1beta1.ConditionProvisioning, status, reason, msg, now) {
		return nil
	}
	err := l.Requests.Client.Status().Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("writing the Provisioning condition of CapacityBuffer %s/%s: %w", b.Namespace, b.Name, err)
	}
	// On a conflict the controller wrote first: the next loop writes it.
	return nil
}
