package autoscaler

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Required pod anti-affinity on the hostname among a request's own pods.
// cluster-autoscaler simulates kube-scheduler's InterPodAffinity plugin, so
// a request for pods that must not share a node gets a node per pod; a
// stand-in that packed them together would answer Provisioned for nodes the
// pods cannot all bind to. Anti-affinity against pods outside the request,
// and on coarser topology keys, is not simulated.

// apartFrom reports whether the pod must not join the request's pods the
// bin already holds, either way round.
func (b *Bin) apartFrom(pod *Pod) bool {
	for _, q := range b.placed {
		if repels(pod, q) || repels(q, pod) {
			return true
		}
	}
	return false
}

// repels reports whether a's required anti-affinity on the hostname selects
// b. Every pod of a request is in the request's namespace, so a term
// applies unless it names other namespaces only or selects namespaces by
// label (which the stand-in does not read).
func repels(a, b *Pod) bool {
	if a.Spec.Affinity == nil || a.Spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, t := range a.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.TopologyKey != corev1.LabelHostname || t.LabelSelector == nil || t.NamespaceSelector != nil || len(t.Namespaces) > 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err == nil && sel.Matches(labels.Set(b.Labels)) {
			return true
		}
	}
	return false
}

// withLabels gives each pod its pod set's template labels.
func withLabels(pods []Pod, sets []map[string]string) {
	for i := range pods {
		if s := pods[i].PodSet; s < len(sets) {
			pods[i].Labels = sets[s]
		}
	}
}
