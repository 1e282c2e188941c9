package capacity

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
)

func TestReconcileNode(t *testing.T) {
	flavor := gpuFlavor()
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	noCondition := func(n *corev1.Node) { n.Status.Conditions = nil }
	deleting := func(n *corev1.Node) { n.DeletionTimestamp = ptr.To(metav1.Unix(1, 0)); n.Finalizers = []string{"x"} }
	cpuOnly := func(n *corev1.Node) { n.Labels = map[string]string{"rack": "r1"} }
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	}
	placed := map[string]string{berthv1.PlacementLabel: "x"}
	placeholder := map[string]string{berthv1.HeadroomPlaceholderLabel: "headroom-x"}
	cases := []struct {
		name        string
		objs        []client.Object
		sinkErr     error
		fail        []fakeapi.Failure
		wantErr     string
		wantDeleted bool
		wantFreeGPU int64 // in milli-units; -1: no upsert
		wantTaints  []admission.Taint
	}{
		{name: "a node that is gone leaves the engine", objs: []client.Object{flavor}, wantDeleted: true, wantFreeGPU: -1},
		{name: "a read that fails names the node", objs: []client.Object{flavor, gpuNode()},
			fail: []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "Node"}}, wantErr: "reading node n1", wantFreeGPU: -1},
		{name: "a flavor list that fails is an error", objs: []client.Object{flavor, gpuNode()},
			fail: []fakeapi.Failure{{Verb: fakeapi.List, Kind: "ResourceFlavor"}}, wantErr: "listing ResourceFlavors", wantFreeGPU: -1},
		{name: "an empty Ready node of the flavor offers all it has", objs: []client.Object{flavor, gpuNode()}, wantFreeGPU: 8000},
		{name: "a cordoned node offers nothing", objs: []client.Object{flavor, gpuNode(cordoned)}, wantDeleted: true, wantFreeGPU: -1},
		{name: "a node that is not Ready offers nothing", objs: []client.Object{flavor, gpuNode(notReady)}, wantDeleted: true, wantFreeGPU: -1},
		{name: "a node without a Ready condition offers nothing", objs: []client.Object{flavor, gpuNode(noCondition)}, wantDeleted: true, wantFreeGPU: -1},
		{name: "a node being deleted offers nothing", objs: []client.Object{flavor, gpuNode(deleting)}, wantDeleted: true, wantFreeGPU: -1},
		{name: "a node of no flavor offers nothing", objs: []client.Object{flavor, gpuNode(cpuOnly)}, wantDeleted: true, wantFreeGPU: -1},
		// The engine matches the taint against the pods' and the flavor's
		// tolerations: the node stays of the flavor, carrying it.
		{name: "a node's taints go to the engine with it", objs: []client.Object{flavor, gpuNode(tainted)}, wantFreeGPU: 8000,
			wantTaints: []admission.Taint{{Key: "maintenance", Effect: admission.TaintNoSchedule}}},
		{name: "running pods' requests are taken off",
			objs:        []client.Object{flavor, gpuNode(), boundPod("a", "2", corev1.PodRunning, nil), boundPod("b", "1", corev1.PodPending, nil)},
			wantFreeGPU: 5000},
		{name: "pods that ended hold nothing",
			objs:        []client.Object{flavor, gpuNode(), boundPod("a", "2", corev1.PodSucceeded, nil), boundPod("b", "4", corev1.PodFailed, nil)},
			wantFreeGPU: 8000},
		{name: "pods of placed gangs are the engine's to count",
			objs: []client.Object{flavor, gpuNode(), boundPod("a", "4", corev1.PodRunning, placed)}, wantFreeGPU: 8000},
		{name: "headroom placeholders' room is free for the replicas that preempt them",
			objs: []client.Object{flavor, gpuNode(), inNamespace("berth-system", boundPod("p", "8", corev1.PodRunning, placeholder)),
				boundPod("a", "2", corev1.PodRunning, nil)}, wantFreeGPU: 6000},
		// A tenant who labels their own pods as placeholders must not make
		// berth count a full node as free for other tenants' gangs.
		{name: "a tenant's pod labelled as a placeholder holds its room",
			objs: []client.Object{flavor, gpuNode(), boundPod("p", "8", corev1.PodRunning, placeholder)}, wantFreeGPU: 0},
		{name: "pods asking for more than is left leave nothing free",
			objs:        []client.Object{flavor, gpuNode(), boundPod("a", "6", corev1.PodRunning, nil), boundPod("b", "6", corev1.PodRunning, nil)},
			wantFreeGPU: 0},
		{name: "a pod list that fails names the node", objs: []client.Object{flavor, gpuNode()},
			fail: []fakeapi.Failure{{Verb: fakeapi.List, Kind: "Pod"}}, wantErr: "listing pods on node n1", wantFreeGPU: -1},
		{name: "the engine's refusal is returned", objs: []client.Object{flavor, gpuNode()}, sinkErr: errors.New("engine refused"),
			wantErr: "engine refused", wantFreeGPU: 8000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &sink{err: tc.sinkErr}
			r, _ := newTestReconciler(t, s, tc.fail, tc.objs...)
			res, err := r.reconcileNode(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "n1"}})
			wantErr(t, err, tc.wantErr)
			if res != (reconcile.Result{}) {
				t.Errorf("result = %+v", res)
			}
			if tc.wantDeleted != slices.Equal(s.deleted, []string{"node/n1"}) {
				t.Errorf("deleted %v, want deleted=%v", s.deleted, tc.wantDeleted)
			}
			if tc.wantFreeGPU < 0 {
				if len(s.nodes) > 0 {
					t.Errorf("nodes upserted %+v, want none", s.nodes)
				}
				return
			}
			if len(s.nodes) != 1 {
				t.Fatalf("nodes upserted %+v, want one", s.nodes)
			}
			n := s.nodes[0]
			if got := n.Free[admission.ResourceName("nvidia.com/gpu")]; got != tc.wantFreeGPU {
				t.Errorf("free GPUs = %d, want %d", got, tc.wantFreeGPU)
			}
			if got := n.Allocatable[admission.ResourceName("nvidia.com/gpu")]; got != 8000 {
				t.Errorf("allocatable GPUs = %d, want 8000", got)
			}
			if !slices.Equal(n.Taints, tc.wantTaints) {
				t.Errorf("taints = %+v, want %+v", n.Taints, tc.wantTaints)
			}
			if !slices.Equal(n.Flavors, []string{"h200"}) || n.Labels["rack"] != "r1" {
				t.Errorf("node = %+v, want flavor h200 in rack r1", n)
			}
		})
	}
}
