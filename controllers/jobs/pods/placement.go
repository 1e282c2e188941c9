package pods

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/admission"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// misplaced says why gated pod p, of a pod set admitted as s, would run
// outside its admission if released; "" when it would not.
//
// The engine chooses a gang's flavor and domain by quota and by the pod
// template its Workload keeps, and a pod's own node selector and
// tolerations may differ from that template (a pod group's later members,
// a StatefulSet's pods of an older revision). A Job's template is
// rewritten so that the admission's values win; a gated pod's node
// selector can only gain keys, so a pod that gives a key of the
// admission's placement another value would run on nodes of another flavor
// or domain than the one it is charged for. Such a pod is held, never
// released. So is a pod that tolerates another ClusterQueue's headroom
// taint: the flavor's node labels would not keep it off the warm nodes
// that queue pays for, which the engine refuses a workload for
// (HeadroomNotAllowed) on its template alone.
//
// A pod's required node affinity is not checked: kube-scheduler places a
// pod only on a node that matches both its node selector and its required
// node affinity, so affinity can narrow the nodes the admission's selector
// allows, leaving the pod unschedulable at worst, but never widen them.
func misplaced(p *corev1.Pod, s jobs.PodSetScheduling) string {
	for _, k := range slices.Sorted(maps.Keys(s.Placement)) {
		if got, ok := p.Spec.NodeSelector[k]; ok && got != s.Placement[k] {
			return fmt.Sprintf("its node selector sets %s=%s and its gang was admitted on nodes with %s=%s (the admission's flavor or topology domain); "+
				"a gated pod's node selector cannot be changed: drop %s from the node selector of the pod (or of the template it is made from), or set it to %s, and create the pod again",
				k, got, k, s.Placement[k], k, s.Placement[k])
		}
	}
	if s.ClusterQueue == "" {
		return ""
	}
	if foreign := lifecycle.ForeignHeadroom(p.Spec.Tolerations, s.ClusterQueue); foreign != "" {
		return admission.ForeignHeadroomMessage(foreign, s.ClusterQueue)
	}
	return ""
}
