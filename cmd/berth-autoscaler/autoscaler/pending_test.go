package autoscaler

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestUnschedulable: which pods ask for a scale-up — those kube-scheduler
// marked Unschedulable, unless bound, gated, terminating, finished,
// consuming a ProvisioningRequest or expendable (priority below the
// cutoff, -10 by default).
func TestUnschedulable(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{unschedulable}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		cutoff int32
		want   bool
	}{
		{"marked Unschedulable by kube-scheduler", pod(nil), -10, true},
		{"no PodScheduled condition: not tried yet", pod(func(p *corev1.Pod) { p.Status.Conditions = nil }), -10, false},
		{"reason SchedulingGated, not Unschedulable", pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated
		}), -10, false},
		{"reason SchedulerError, not Unschedulable", pod(func(p *corev1.Pod) {
			p.Status.Conditions[0].Reason = corev1.PodReasonSchedulerError
		}), -10, false},
		{"PodScheduled=True", pod(func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }), -10, false},
		{"gated, even with an Unschedulable condition", pod(func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "berth.dev/admission"}}
		}), -10, false},
		{"consuming a ProvisioningRequest", pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{autoscalingv1.ProvisioningRequestPodAnnotationKey: "req"}
		}), -10, false},
		{"bound to a node", pod(func(p *corev1.Pod) { p.Spec.NodeName = "n0" }), -10, false},
		{"terminating", pod(func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }), -10, false},
		{"failed", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), -10, false},
		{"succeeded", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), -10, false},
		{"priority -11 is expendable", pod(func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](-11) }), -10, false},
		{"priority -10 is not", pod(func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](-10) }), -10, true},
		{"no priority is not", pod(func(p *corev1.Pod) { p.Spec.Priority = nil }), -10, true},
		{"priority 0 under a cutoff of 1", pod(func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](0) }), 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unschedulable(tc.pod, tc.cutoff); got != tc.want {
				t.Errorf("Unschedulable = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWaitsForPreemption: a pod nominated to an existing node waits for
// its preemption there, and is not scaled up for; one nominated to a node
// that is gone, or not nominated, asks for a scale-up as usual.
func TestWaitsForPreemption(t *testing.T) {
	exists := func(name string) bool { return name == "n0" }
	for _, tc := range []struct {
		name, nominated string
		want            bool
	}{
		{"nominated to an existing node", "n0", true},
		{"nominated to a node that is gone", "n9", false},
		{"not nominated", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{NominatedNodeName: tc.nominated}}
			if got := WaitsForPreemption(p, exists); got != tc.want {
				t.Errorf("WaitsForPreemption = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPlaceablePods: a candidate listed as unschedulable asks for a
// scale-up only if the loop's view, listed after it, still has it
// unschedulable: not bound since (it takes room on its node in the view),
// not gone, and not nominated to a node that exists.
func TestPlaceablePods(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	candidate := func() corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{unschedulable}
		return p
	}
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n0"}}}
	for _, tc := range []struct {
		name string
		view func(*corev1.Pod) // how the view's copy differs; nil: not in the view
		want int
	}{
		{"still unschedulable", func(*corev1.Pod) {}, 1},
		{"bound since it was listed", func(p *corev1.Pod) { p.Spec.NodeName = "n0" }, 0},
		{"nominated to an existing node since", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n0" }, 0},
		{"nominated to a node that is gone", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n9" }, 1},
		{"deleted since", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &View{Nodes: nodes}
			if tc.view != nil {
				p := candidate()
				tc.view(&p)
				v.Pods = []corev1.Pod{p}
			}
			if got := placeablePods([]corev1.Pod{candidate()}, v, DefaultExpendablePodsPriorityCutoff); len(got) != tc.want {
				t.Errorf("placeable pods = %d, want %d", len(got), tc.want)
			}
		})
	}
}

// TestExpendableCutoff: unset means cluster-autoscaler's -10.
func TestExpendableCutoff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cutoff *int32
		want   int32
	}{
		{"unset", nil, -10},
		{"set", ptr.To[int32](-100), -100},
		{"zero is a cutoff, not unset", ptr.To[int32](0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Options{ExpendablePodsPriorityCutoff: tc.cutoff}).expendableCutoff(); got != tc.want {
				t.Errorf("cutoff = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPodsUpcoming: unschedulable pods count on the nodes recorded on
// pools and not created yet, and on the nodes created for them and not
// ready yet (without condition taints), a Ready one whose not-ready taint
// is not lifted yet included; not on ready ones (they are bins),
// nor on buffers' or requests' nodes, and a recorded node already created
// counts once.
func TestPodsUpcoming(t *testing.T) {
	cp := berthv1.CapacityPool{}
	cp.Name = "p"
	cp.Spec.NodeTemplate.Allocatable = rl("nvidia.com/gpu", "8")
	cp.Annotations = map[string]string{BufferPendingAnnotation: `[{"pool":"p","node":"p-2","due":"2026-12-01T12:00:00Z"},{"pool":"p","node":"p-0","due":"2026-12-01T12:00:00Z"}]`}
	node := func(name string, annotations map[string]string, ready bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
		n.Spec.Taints = []corev1.Taint{reservedTaint}
		if ready {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		} else {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
		}
		n.Status.Allocatable = rl("nvidia.com/gpu", "8")
		return n
	}
	forPods := map[string]string{PodsNodeAnnotation: "true"}
	v := &View{Pools: []berthv1.CapacityPool{cp}, Nodes: []corev1.Node{
		node("p-0", forPods, false),
		node("p-1", forPods, true),
		node("p-3", map[string]string{BufferNodeAnnotation: "ns/buf"}, false),
		node("p-4", map[string]string{CreatedForAnnotation: "ns/req"}, false),
		node("p-5", forPods, true),
	}}
	// Ready, but the node lifecycle controller has not lifted the
	// not-ready taint yet: still starting, as cluster-autoscaler counts it.
	v.Nodes[4].Spec.Taints = append(v.Nodes[4].Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	var names []string
	bins := podsUpcoming(v)
	for _, b := range bins {
		names = append(names, b.Name)
	}
	if want := []string{"p-0", "p-5", "p-2"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("upcoming = %v, want %v", names, want)
	}
	if want := []corev1.Taint{reservedTaint}; !reflect.DeepEqual(bins[0].Taints, want) {
		t.Errorf("a joining node's taints = %v, want only the lasting %v", bins[0].Taints, want)
	}
	if got := poolPending(v.Pools); !reflect.DeepEqual(got, []NewNode{{Pool: "p", Name: "p-2"}, {Pool: "p", Name: "p-0"}}) {
		t.Errorf("pool pending = %v", got)
	}
}

// TestPodsNodeFor: a node created for unschedulable pods says so, and
// names no request.
func TestPodsNodeFor(t *testing.T) {
	cp := &berthv1.CapacityPool{}
	cp.Name = "p"
	n := podsNodeFor(cp, "p-0")
	if n.Annotations[PodsNodeAnnotation] != "true" || n.Annotations[KwokNodeAnnotation] != "fake" {
		t.Errorf("annotations = %v", n.Annotations)
	}
	if _, ok := n.Annotations[CreatedForAnnotation]; ok {
		t.Errorf("names a request: %v", n.Annotations)
	}
	if got := createdFor(n); got != "unschedulable pods" {
		t.Errorf("createdFor = %q", got)
	}
}
