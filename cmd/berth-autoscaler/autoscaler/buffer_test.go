package autoscaler

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestPlaceSome: a buffer's fake pods make an ordinary scale-up — what
// fits existing bins needs nothing, one pool takes as many of the rest as
// its room holds, and the others stay unplaced, where Place would open
// nothing.
func TestPlaceSome(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pods     []Pod
		bins     []*Bin
		pools    []*Pool
		newNodes []NewNode
		unplaced []int
	}{
		{
			name:  "all fit existing room: no node",
			pods:  gpuPods(0, 2, "4", nil),
			bins:  []*Bin{bin("n1", "8", nil)},
			pools: []*Pool{pool("p", nil, "p-0")},
		},
		{
			name:     "the rest go to one pool, as many nodes as hold them",
			pods:     gpuPods(0, 3, "8", nil),
			bins:     []*Bin{bin("n1", "8", nil)},
			pools:    []*Pool{pool("p", nil, "p-0", "p-1", "p-2")},
			newNodes: []NewNode{{Name: "p-0", Pool: "p"}, {Name: "p-1", Pool: "p"}},
		},
		{
			name:     "not all or nothing: a pool too small still takes what it holds",
			pods:     gpuPods(0, 3, "8", nil),
			pools:    []*Pool{pool("p", nil, "p-0")},
			newNodes: []NewNode{{Name: "p-0", Pool: "p"}},
			unplaced: []int{1, 2},
		},
		{
			name:     "a pool whose taint the pods do not tolerate is no option",
			pods:     gpuPods(0, 1, "8", nil),
			pools:    []*Pool{tainted(pool("a-tainted", nil, "a-tainted-0"), reservedTaint), pool("b", nil, "b-0")},
			newNodes: []NewNode{{Name: "b-0", Pool: "b"}},
		},
		{
			name:     "an out-of-stock choice opens nothing",
			pods:     gpuPods(0, 1, "8", nil),
			pools:    []*Pool{{Name: "p", Allocatable: rl("nvidia.com/gpu", "8", "cpu", "64"), Names: []string{"p-0"}, OutOfStock: true}},
			unplaced: []int{0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlaceSome(tc.pods, tc.bins, tc.pools)
			if !reflect.DeepEqual(plan.NewNodes, tc.newNodes) {
				t.Errorf("new nodes = %v, want %v", plan.NewNodes, tc.newNodes)
			}
			if !reflect.DeepEqual(plan.Unplaced, tc.unplaced) {
				t.Errorf("unplaced = %v, want %v", plan.Unplaced, tc.unplaced)
			}
		})
	}
}

// TestManagedTemplateName: cluster-autoscaler's name, cut to 253
// characters.
func TestManagedTemplateName(t *testing.T) {
	if got := ManagedTemplateName("web"); got != "capacitybuffer-web-pod-template" {
		t.Errorf("name = %q", got)
	}
	long := ManagedTemplateName(strings.Repeat("x", 253))
	if len(long) != 253 || !strings.HasSuffix(long, "-pod-template") {
		t.Errorf("long name has %d characters: %q", len(long), long)
	}
}

// TestUses: the events that reconcile a buffer's namespace.
func TestUses(t *testing.T) {
	byTemplate := &cbv1beta1.CapacityBuffer{Spec: cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "t"}}}
	byDeploy := &cbv1beta1.CapacityBuffer{Spec: cbv1beta1.CapacityBufferSpec{ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "d"}}}
	byDeploy.Name = "b"
	for _, tc := range []struct {
		name             string
		b                *cbv1beta1.CapacityBuffer
		group, kind, obj string
		want             bool
	}{
		{"its PodTemplate", byTemplate, "", "PodTemplate", "t", true},
		{"another PodTemplate", byTemplate, "", "PodTemplate", "u", false},
		{"its managed PodTemplate", byDeploy, "", "PodTemplate", "capacitybuffer-b-pod-template", true},
		{"its Deployment", byDeploy, "apps", "Deployment", "d", true},
		{"a StatefulSet of that name", byDeploy, "apps", "StatefulSet", "d", false},
		{"any quota", byTemplate, "", "ResourceQuota", "q", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := uses(tc.b, tc.group, tc.kind, tc.obj); got != tc.want {
				t.Errorf("uses = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUpcoming: a buffer counts on the nodes decided for it and not yet
// created, and on those created for it and not ready yet (a Ready one
// still under the not-ready taint included); not on others'.
func TestUpcoming(t *testing.T) {
	cp := berthv1.CapacityPool{}
	cp.Name = "p"
	cp.Spec.NodeTemplate.Allocatable = rl("nvidia.com/gpu", "8")
	b := &cbv1beta1.CapacityBuffer{}
	b.Namespace, b.Name = "ns", "buf"
	b.Annotations = map[string]string{BufferPendingAnnotation: `[{"pool":"p","node":"p-2","due":"2026-12-01T12:00:00Z"},{"pool":"gone","node":"gone-0","due":"2026-12-01T12:00:00Z"}]`}
	node := func(name, owner string, ready bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{BufferNodeAnnotation: owner}}}
		n.Spec.Taints = []corev1.Taint{reservedTaint}
		if ready {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		} else {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
		}
		n.Status.Allocatable = rl("nvidia.com/gpu", "8")
		return n
	}
	v := &View{Pools: []berthv1.CapacityPool{cp}, Nodes: []corev1.Node{
		node("p-0", "ns/buf", false), node("p-1", "ns/buf", true), node("p-3", "ns/other", false),
	}}
	// Ready, but the not-ready taint is not lifted yet: still joining.
	v.Nodes = append(v.Nodes, node("p-4", "ns/buf", true))
	v.Nodes[3].Spec.Taints = append(v.Nodes[3].Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	var names []string
	bins := upcoming(b, v)
	for _, bin := range bins {
		names = append(names, bin.Name)
	}
	if want := []string{"p-2", "p-0", "p-4"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("upcoming = %v, want %v", names, want)
	}
	if want := []corev1.Taint{reservedTaint}; !reflect.DeepEqual(bins[1].Taints, want) {
		t.Errorf("a joining node's taints = %v, want only the lasting %v", bins[1].Taints, want)
	}
}
