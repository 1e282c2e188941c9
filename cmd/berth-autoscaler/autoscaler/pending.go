package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// The scale-up for unschedulable pods (Options.ScaleUpUnschedulablePods):
// what cluster-autoscaler does first of all. Each loop the pods
// kube-scheduler could not place are fitted, like a CapacityBuffer's fake
// pods, on the free room of Ready nodes and of the nodes still coming for
// them; the rest make one ordinary scale-up of one pool. The nodes decided
// are recorded on the chosen CapacityPool (BufferPendingAnnotation, the
// buffers' record and format) until they are created, so a restarted
// autoscaler creates them once and their names and room stay taken.

// PodsNodeAnnotation "true" on a node the autoscaler created says it was
// created for unschedulable pods. Until such a node is Ready it is room
// the unschedulable pods count on, so one loop's scale-up is not repeated
// while its nodes join.
const PodsNodeAnnotation = "autoscaler.berth.dev/unschedulable-pods"

// DefaultExpendablePodsPriorityCutoff is cluster-autoscaler's
// --expendable-pods-priority-cutoff: pods of a lower priority are
// expendable, and never scaled up for.
const DefaultExpendablePodsPriorityCutoff int32 = -10

// unschedulableIndex indexes the pods Unschedulable counts (value "true"),
// so a loop lists those alone from the cache, not every pod.
const unschedulableIndex = "autoscaler.berth.dev/unschedulable"

// expendableCutoff is the priority below which pods are expendable.
func (o Options) expendableCutoff() int32 {
	if o.ExpendablePodsPriorityCutoff == nil {
		return DefaultExpendablePodsPriorityCutoff
	}
	return *o.ExpendablePodsPriorityCutoff
}

// Unschedulable reports whether a pod asks for a scale-up, as
// cluster-autoscaler's unschedulable pod lister and filters decide: not
// bound (spec.nodeName empty), not finished, not being deleted, without
// scheduling gates (kube-scheduler has not tried it), marked by
// kube-scheduler PodScheduled=False with reason Unschedulable, not
// consuming a ProvisioningRequest (its capacity is the request's), and
// not expendable (spec.priority, when set, not below cutoff).
func Unschedulable(pod *corev1.Pod, cutoff int32) bool {
	if pod.Spec.NodeName != "" || !pod.DeletionTimestamp.IsZero() || len(pod.Spec.SchedulingGates) > 0 ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.Annotations[autoscalingv1.ProvisioningRequestPodAnnotationKey] != "" {
		return false
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority < cutoff {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// indexUnschedulable adds unschedulableIndex to the manager's pod cache.
func indexUnschedulable(ctx context.Context, mgr ctrl.Manager, cutoff int32) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, unschedulableIndex, func(o client.Object) []string {
		if p, ok := o.(*corev1.Pod); ok && Unschedulable(p, cutoff) {
			return []string{"true"}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing unschedulable pods: %w", err)
	}
	return nil
}

// unschedulablePods creates the nodes decided for unschedulable pods whose
// latency has passed, then returns the pods that ask for a scale-up, by
// namespace and name, as the cache has them now; none without
// Options.ScaleUpUnschedulablePods. They are candidates: placeablePods
// checks them again against the loop's view.
func (l *BufferLoop) unschedulablePods(ctx context.Context, now time.Time) ([]corev1.Pod, error) {
	r := l.Requests
	if !r.Options.ScaleUpUnschedulablePods {
		return nil, nil
	}
	createErr := l.createDuePools(ctx, now)
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{unschedulableIndex: "true"}); err != nil {
		return nil, errors.Join(createErr, fmt.Errorf("listing unschedulable pods: %w", err))
	}
	items := list.Items
	slices.SortFunc(items, func(a, b corev1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return items, createErr
}

// placeablePods are the candidates that still ask for a scale-up in the
// loop's view, whose pods were listed after them: cluster-autoscaler
// decides on one snapshot, in which a pod is either bound or unschedulable.
// A candidate kube-scheduler bound since it was listed is in the view on its
// node, taking room there; scaling up for it as well would add a node no pod
// needs. Also left out: a pod waiting for its preemption (WaitsForPreemption).
func placeablePods(candidates []corev1.Pod, v *View, cutoff int32) []Pod {
	byUID := make(map[types.UID]*corev1.Pod, len(v.Pods))
	for i := range v.Pods {
		byUID[v.Pods[i].UID] = &v.Pods[i]
	}
	nodes := make(map[string]bool, len(v.Nodes))
	for i := range v.Nodes {
		nodes[v.Nodes[i].Name] = true
	}
	nodeExists := func(name string) bool { return nodes[name] }
	pods := make([]Pod, 0, len(candidates))
	for i := range candidates {
		// The index was computed with the same cutoff; checked again on the
		// view's copy, so a pod the cache changed since stays out.
		p, ok := byUID[candidates[i].UID]
		if ok && Unschedulable(p, cutoff) && !WaitsForPreemption(p, nodeExists) {
			pods = append(pods, Pod{Spec: &p.Spec, Requests: PodRequests(&p.Spec), Labels: p.Labels})
		}
	}
	return pods
}

// WaitsForPreemption reports whether an unschedulable pod waits for the
// lower-priority pods kube-scheduler preempted for it on an existing node
// (status.nominatedNodeName): cluster-autoscaler splits such pods off
// (FilterOutExpendableAndSplit) and counts them as scheduled on that node,
// so it never scales up for them. Scaling up for one would race its
// preemption, and it could bind on the new node instead of the room
// freed for it.
func WaitsForPreemption(p *corev1.Pod, nodeExists func(string) bool) bool {
	n := p.Status.NominatedNodeName
	return n != "" && nodeExists(n)
}

// scaleUpPods fits the unschedulable pods on bins (consuming their room)
// and on the nodes still coming for them, and makes one ordinary scale-up
// of one pool for the rest: the nodes are recorded on the pool, then
// created once due.
func (l *BufferLoop) scaleUpPods(ctx context.Context, pods []Pod, v *View, bins []*Bin, pools []*Pool, now time.Time) error {
	r := l.Requests
	plan := PlaceSome(pods, append(append([]*Bin(nil), bins...), podsUpcoming(v)...), pools)
	logger := log.FromContext(ctx).WithName("unschedulable-pods")
	if plan.Chosen != nil && plan.Chosen.OutOfStock {
		// The cloud refused to grow the pool: back it off, for the buffers
		// of this loop too; the next loop tries another.
		r.backOff(plan.Chosen.Group, now)
		r.backedOff(pools, now)
		logger.Info("the scale-up for unschedulable pods failed: pool out of stock", "pool", plan.Chosen.Group)
		return nil
	}
	if len(plan.Unplaced) > 0 {
		logger.V(1).Info("unschedulable pods fit nowhere", "pods", len(plan.Unplaced))
	}
	if len(plan.NewNodes) == 0 {
		return nil
	}
	var cp *berthv1.CapacityPool
	for i := range v.Pools {
		if v.Pools[i].Name == plan.NewNodes[0].Pool {
			cp = &v.Pools[i]
		}
	}
	if cp == nil {
		return fmt.Errorf("the scale-up for unschedulable pods chose CapacityPool %s, which is not in the view", plan.NewNodes[0].Pool)
	}
	due := now.Add(r.latency(ctx, cp))
	pending := PendingOfPool(cp)
	for _, n := range plan.NewNodes {
		pending = append(pending, PendingNode{Pool: n.Pool, Node: n.Name, Due: metav1.NewTime(due)})
	}
	logger.Info("scaling up for unschedulable pods", "pool", cp.Name, "nodes", len(plan.NewNodes), "pods", len(pods)-len(plan.Unplaced))
	// Recorded before any node is created, so a restart carries on and the
	// names and room stay taken.
	if err := setPending(ctx, r.Client, cp, "CapacityPool "+cp.Name, pending); err != nil {
		return err
	}
	return l.createDuePool(ctx, cp, now)
}

// createDuePools creates, in every pool, the nodes decided for
// unschedulable pods whose latency has passed. Pools are read from the API
// server: the record must be the latest, or a node would be created twice.
func (l *BufferLoop) createDuePools(ctx context.Context, now time.Time) error {
	list := &berthv1.CapacityPoolList{}
	if err := l.Requests.Reader.List(ctx, list); err != nil {
		return fmt.Errorf("listing CapacityPools: %w", err)
	}
	var errs []error
	for i := range list.Items {
		if cp := &list.Items[i]; len(PendingOfPool(cp)) > 0 {
			errs = append(errs, l.createDuePool(ctx, cp, now))
		}
	}
	return errors.Join(errs...)
}

// createDuePool creates pool cp's nodes decided for unschedulable pods
// whose latency has passed, and records those left.
func (l *BufferLoop) createDuePool(ctx context.Context, cp *berthv1.CapacityPool, now time.Time) error {
	pending := PendingOfPool(cp)
	var left []PendingNode
	for _, p := range pending {
		if now.Before(p.Due.Time) {
			left = append(left, p)
			continue
		}
		if err := l.Requests.createNode(ctx, cp, podsNodeFor(cp, p.Node)); err != nil {
			return err
		}
	}
	if len(left) == len(pending) {
		return nil
	}
	return setPending(ctx, l.Requests.Client, cp, "CapacityPool "+cp.Name, left)
}

// podsNodeFor is the node name of pool cp created for unschedulable pods.
func podsNodeFor(cp *berthv1.CapacityPool, name string) *corev1.Node {
	node := NodeFor(cp, name, "")
	delete(node.Annotations, CreatedForAnnotation)
	node.Annotations[PodsNodeAnnotation] = "true"
	return node
}

// PendingOfPool decodes the nodes a scale-up for unschedulable pods
// decided in pool cp and has not created yet (its BufferPendingAnnotation);
// a value that does not decode counts as none.
func PendingOfPool(cp *berthv1.CapacityPool) []PendingNode {
	return decodePending(cp.Annotations[BufferPendingAnnotation])
}

// poolPending are the nodes every pool's record says are still to be
// created for unschedulable pods.
func poolPending(pools []berthv1.CapacityPool) []NewNode {
	var out []NewNode
	for i := range pools {
		for _, p := range PendingOfPool(&pools[i]) {
			out = append(out, NewNode{Pool: p.Pool, Name: p.Node})
		}
	}
	return out
}

// podsUpcoming are the nodes still coming for unschedulable pods, as bins
// they may count on (cluster-autoscaler counts a node group's upcoming
// nodes): those recorded on pools and not created yet, and those created
// for them and not Ready yet (without the node.kubernetes.io/ condition
// taints every new node carries).
func podsUpcoming(v *View) []*Bin {
	exists := make(map[string]bool, len(v.Nodes))
	var out []*Bin
	for i := range v.Nodes {
		n := &v.Nodes[i]
		exists[n.Name] = true
		if n.Annotations[PodsNodeAnnotation] != "true" || !joining(n) {
			continue
		}
		out = append(out, &Bin{Name: n.Name, Labels: n.Labels, Taints: lasting(n.Spec.Taints), Free: n.Status.Allocatable.DeepCopy()})
	}
	for i := range v.Pools {
		cp := &v.Pools[i]
		for _, p := range PendingOfPool(cp) {
			if exists[p.Node] {
				continue // created; counted above while it joins
			}
			n := NodeFor(cp, p.Node, "")
			out = append(out, &Bin{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Free: n.Status.Allocatable})
		}
	}
	return out
}
