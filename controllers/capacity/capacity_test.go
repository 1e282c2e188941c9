package capacity

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

func TestMatches(t *testing.T) {
	rf := &berthv1.ResourceFlavor{Spec: berthv1.ResourceFlavorSpec{
		NodeLabels:  map[string]string{"gpu": "h200"},
		Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}}
	node := func(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"labels match, no taints", node(map[string]string{"gpu": "h200", "rack": "r1"}), true},
		{"label missing", node(map[string]string{"rack": "r1"}), false},
		{"tolerated taint", node(map[string]string{"gpu": "h200"}, corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}), true},
		// Taints go to the engine with the node, which matches them
		// against the pods' and the flavor's tolerations.
		{"untolerated taint: still of the flavor", node(map[string]string{"gpu": "h200"}, corev1.Taint{Key: "example.com/reserved", Effect: corev1.TaintEffectNoExecute}), true},
		{"PreferNoSchedule does not exclude", node(map[string]string{"gpu": "h200"}, corev1.Taint{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}), true},
	}
	for _, tc := range tests {
		if got := Matches(rf, tc.node); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestToEngine(t *testing.T) {
	pool := &berthv1.CapacityPool{
		ObjectMeta: metav1.ObjectMeta{Name: "r1"},
		Spec: berthv1.CapacityPoolSpec{Flavor: "h200", MaxNodes: 8, NodeTemplate: berthv1.NodeTemplate{
			Labels:      map[string]string{"rack": "r1"},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
		}},
		Status: berthv1.CapacityPoolStatus{Nodes: 1},
	}
	tests := []struct {
		name  string
		nodes int32
		want  int32
	}{
		// The status may be stale (berth writes it after counting): only
		// the nodes counted now are subtracted.
		{"labelled nodes are not available; the status is ignored", 3, 5},
		{"never negative", 9, 0},
	}
	for _, tc := range tests {
		got := lifecycle.PoolToEngine(pool, tc.nodes)
		if got.Available != tc.want || got.NodeCapacity["nvidia.com/gpu"] != 8000 || got.Flavor != "h200" {
			t.Errorf("%s: %+v, want %d available", tc.name, got, tc.want)
		}
	}
	flavors := []struct {
		policy *berthv1.ProvisioningPolicy
		want   admission.ProvisioningPolicy
	}{
		{nil, admission.ProvisioningPolicy{Mode: admission.ProvisionNever}},
		{&berthv1.ProvisioningPolicy{}, admission.ProvisioningPolicy{Mode: admission.ProvisionIfNeeded}},
		{&berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningAlways, MaxAttempts: 5, BackoffSeconds: 30, CapacityNotFoundSeconds: 120, AnswerTimeoutSeconds: 600},
			admission.ProvisioningPolicy{Mode: admission.ProvisionAlways, MaxAttempts: 5, Backoff: 30 * time.Second,
				CapacityNotFoundTimeout: 2 * time.Minute, AnswerTimeout: 10 * time.Minute}},
	}
	for _, tc := range flavors {
		rf := &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"}, Spec: berthv1.ResourceFlavorSpec{Provisioning: tc.policy}}
		if got := lifecycle.FlavorToEngine(rf).Provisioning; got != tc.want {
			t.Errorf("policy %+v: %+v, want %+v", tc.policy, got, tc.want)
		}
	}
}
