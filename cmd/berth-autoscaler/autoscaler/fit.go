package autoscaler

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// PodRequests returns what kube-scheduler reserves on a node for one pod of
// spec: the larger of the sum of its containers (plus restartable init
// containers, which keep running) and each init container's peak, plus the
// pod overhead. A container that sets a limit but no request requests its
// limit, as the API server defaults it for a Pod (it does not for a
// PodTemplate).
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range spec.Containers {
		add(total, containerRequests(&spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	initPeak := corev1.ResourceList{}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		reqs := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sidecars, reqs)
			maxInto(initPeak, sidecars)
			continue
		}
		peak := sidecars.DeepCopy()
		add(peak, reqs)
		maxInto(initPeak, peak)
	}
	add(total, sidecars)
	maxInto(total, initPeak)
	add(total, spec.Overhead)
	return total
}

// containerRequests is a container's requests, with limits standing in for
// requests it does not set.
func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := c.Resources.Requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, limit := range c.Resources.Limits {
		if _, ok := out[name]; !ok {
			out[name] = limit.DeepCopy()
		}
	}
	return out
}

// add adds b to a.
func add(a, b corev1.ResourceList) {
	for name, q := range b {
		sum := a[name]
		sum.Add(q)
		a[name] = sum
	}
}

// subtract subtracts b from a; the result may go negative.
func subtract(a, b corev1.ResourceList) {
	for name, q := range b {
		diff := a[name]
		diff.Sub(q)
		a[name] = diff
	}
}

// maxInto raises every quantity of a to at least the one in b.
func maxInto(a, b corev1.ResourceList) {
	for name, q := range b {
		if cur, ok := a[name]; !ok || cur.Cmp(q) < 0 {
			a[name] = q.DeepCopy()
		}
	}
}

// NodeUsable reports whether kube-scheduler would place new pods on node at
// all: it is ready (NodeReady) and not cordoned or being deleted.
func NodeUsable(node *corev1.Node) bool {
	if node.Spec.Unschedulable || !node.DeletionTimestamp.IsZero() {
		return false
	}
	return NodeReady(node)
}

// NodeReady reports whether node is ready as cluster-autoscaler counts
// readiness: NodeReady=True, and none of the condition taints that say
// otherwise. A node just registered turns Ready before the node lifecycle
// controller lifts the node.kubernetes.io/not-ready taint the API server
// gave it at creation; until then kube-scheduler places nothing there, and
// cluster-autoscaler counts the node as still starting (upcoming), not as
// room that pods failed to use. Reading Ready alone, the autoscaler would
// see a full-looking node in that window and scale up a second time.
func NodeReady(node *corev1.Node) bool {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, t := range node.Spec.Taints {
		// The condition taints GetReadinessState reads as "not ready".
		switch t.Key {
		case corev1.TaintNodeNotReady, corev1.TaintNodeDiskPressure, corev1.TaintNodeNetworkUnavailable:
			return false
		}
	}
	return ready
}

// Admits reports whether a pod of spec may run on a node with name, labels
// and taints, leaving resources aside: the pod's nodeSelector and required
// node affinity match the node, and the pod tolerates every NoSchedule and
// NoExecute taint. For a node that does not exist yet name is empty, so a
// matchFields term on metadata.name does not match it.
func Admits(spec *corev1.PodSpec, name string, labels map[string]string, taints []corev1.Taint) bool {
	node := &corev1.Node{}
	node.Name = name
	node.Labels = labels
	ok, err := nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity).Match(node)
	if err != nil || !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), taints, spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	return !untolerated
}

// fits reports whether free covers reqs, and a pod slot when free counts
// pods.
func fits(reqs, free corev1.ResourceList) bool {
	for name, q := range reqs {
		if q.IsZero() {
			continue
		}
		have, ok := free[name]
		if !ok || have.Cmp(q) < 0 {
			return false
		}
	}
	if slots, ok := free[corev1.ResourcePods]; ok && slots.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
		return false
	}
	return true
}

// take removes one pod of reqs (and its pod slot, when free counts pods)
// from free.
func take(free, reqs corev1.ResourceList) {
	subtract(free, reqs)
	if slots, ok := free[corev1.ResourcePods]; ok {
		slots.Sub(*resource.NewQuantity(1, resource.DecimalSI))
		free[corev1.ResourcePods] = slots
	}
}
