package lifecycle

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Taints and tolerations in the engine's own form (see admission/taints.go).
// The engine matches them as corev1.Toleration.ToleratesTaint does with the
// comparison operators (Lt, Gt; alpha, off by default) disabled: an
// operator the engine does not know matches nothing, so berth never counts
// a node or pool for pods the scheduler might refuse there.

// TaintsToEngine is the engine's form of a node's or node template's
// taints; the engine keeps only those that exclude (NoSchedule,
// NoExecute). nil when there are none.
func TaintsToEngine(taints []corev1.Taint) []admission.Taint {
	if len(taints) == 0 {
		return nil
	}
	out := make([]admission.Taint, 0, len(taints))
	for _, t := range taints {
		out = append(out, admission.Taint{Key: t.Key, Value: t.Value, Effect: admission.TaintEffect(t.Effect)})
	}
	return out
}

// TolerationsToEngine is the engine's form of tolerations (their
// tolerationSeconds does not matter for where pods may be placed); nil when
// there are none.
func TolerationsToEngine(tols []corev1.Toleration) []admission.Toleration {
	if len(tols) == 0 {
		return nil
	}
	out := make([]admission.Toleration, 0, len(tols))
	for _, t := range tols {
		out = append(out, admission.Toleration{Key: t.Key, Operator: admission.TolerationOperator(t.Operator),
			Value: t.Value, Effect: admission.TaintEffect(t.Effect)})
	}
	return out
}

// tolerationsOf are a pod set's own tolerations, as its scheduling template
// keeps them (the flavor's are added by the engine where it places the pod
// set, as berth adds them to the pods it releases on the flavor).
func tolerationsOf(t *berthv1.PodSetTemplate) []admission.Toleration {
	if t == nil {
		return nil
	}
	return TolerationsToEngine(t.Spec.Tolerations)
}

// foreignHeadroom is the ClusterQueue whose headroom taint the template's
// pods tolerate, when that is not clusterQueue (see ForeignHeadroom).
func foreignHeadroom(t *berthv1.PodSetTemplate, clusterQueue string) string {
	if t == nil {
		return ""
	}
	return ForeignHeadroom(t.Spec.Tolerations, clusterQueue)
}

// ForeignHeadroom is the ClusterQueue whose headroom taint tols tolerate,
// when that is not clusterQueue, the one their pods are queued in:
// admission.AnyHeadroom when they tolerate it whatever its value (Exists
// on its key, or on no key); "" when they tolerate no other queue's.
//
// The taint keeps a queue's warm nodes for its own replicas; a tenant
// writes their pods' tolerations, so a toleration is the one thing berth
// can check before a borrower's pods reach those nodes: the engine checks
// a workload's template, and the release of gated pods each pod's own.
func ForeignHeadroom(tols []corev1.Toleration, clusterQueue string) string {
	// No ClusterQueue is named "/": a toleration of this taint tolerates
	// every queue's.
	everyQueue := corev1.Taint{Key: admission.HeadroomTaintKey, Value: "/", Effect: corev1.TaintEffectNoSchedule}
	for i := range tols {
		tol := &tols[i]
		if tol.ToleratesTaint(klog.Background(), &everyQueue, false) {
			return admission.AnyHeadroom
		}
		if tol.Key != admission.HeadroomTaintKey || tol.Value == clusterQueue {
			continue
		}
		other := corev1.Taint{Key: tol.Key, Value: tol.Value, Effect: corev1.TaintEffectNoSchedule}
		if tol.ToleratesTaint(klog.Background(), &other, false) {
			return tol.Value
		}
	}
	return ""
}
