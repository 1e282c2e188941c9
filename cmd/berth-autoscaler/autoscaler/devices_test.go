package autoscaler

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/capacity"
)

const driver = "gpu.example.com"

// devicePool is a pool whose nodes have n devices of the given product.
func devicePool(name string, labels map[string]string, n int32, product string, names ...string) *Pool {
	cp := &berthv1.CapacityPool{Spec: berthv1.CapacityPoolSpec{NodeTemplate: berthv1.NodeTemplate{Devices: []berthv1.TemplateDevices{{
		Name: "gpu", Driver: driver, Count: n,
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"product": {StringValue: ptr.To(product)}},
		Capacity:   map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("141Gi")},
	}}}}}
	p := pool(name, labels, names...)
	p.Allocatable = rl("cpu", "64")
	p.Devices = TemplateDevices(cp, "")
	return p
}

// claimPods are n pods of pod set 0 whose one claim asks for count devices
// of class, which selects expr (no class when expr is "-").
func claimPods(n int, count int64, expr string, selector map[string]string) []Pod {
	classes := map[string]*resourcev1.DeviceClass{}
	if expr != "-" {
		classes["gpu"] = &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}}
	}
	claims := map[string]*resourcev1.ResourceClaimSpec{"gpus": {Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count},
	}}}}}
	reqs := DeviceRequestsOf(claims, classes, capacity.NewSelectors())
	spec := &corev1.PodSpec{NodeSelector: selector}
	var out []Pod
	for range n {
		out = append(out, Pod{Spec: spec, Requests: rl("cpu", "1"), Devices: reqs})
	}
	return out
}

func TestPlaceDevices(t *testing.T) {
	h200 := `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].product == "H200"`
	bigMemory := `device.capacity["gpu.example.com"].memory.compareTo(quantity("100Gi")) >= 0`
	rackA := map[string]string{"rack": "a"}
	cases := []struct {
		name     string
		pods     []Pod
		bins     []*Bin
		pools    []*Pool
		assigned []string
		newNodes []NewNode
		why      string
	}{
		{
			name:     "pods pack onto a new node until its devices run out",
			pods:     claimPods(3, 4, h200, nil),
			pools:    []*Pool{devicePool("p", nil, 8, "H200", "p-0", "p-1")},
			assigned: []string{"p-0", "p-0", "p-1"},
			newNodes: []NewNode{{"p-0", "p"}, {"p-1", "p"}},
		},
		{
			name:     "a pool whose devices the class does not select is refused",
			pods:     claimPods(1, 1, h200, nil),
			pools:    []*Pool{devicePool("a100", nil, 8, "A100", "a100-0"), devicePool("h200", nil, 8, "H200", "h200-0")},
			assigned: []string{"h200-0"},
			newNodes: []NewNode{{"h200-0", "h200"}},
		},
		{
			name:  "no pool's devices match: nothing is created",
			pods:  claimPods(1, 1, h200, nil),
			pools: []*Pool{devicePool("a100", nil, 8, "A100", "a100-0")},
			why:   "pool a100: one node's devices cannot satisfy one pod's resource claims (gpus/gpu)",
		},
		{
			name:  "a pool without devices cannot take a pod with claims",
			pods:  claimPods(1, 1, h200, nil),
			pools: []*Pool{pool("plain", nil, "plain-0")},
			why:   "pool plain: one node's devices cannot satisfy one pod's resource claims",
		},
		{
			name:  "more devices than one node has",
			pods:  claimPods(1, 9, h200, nil),
			pools: []*Pool{devicePool("p", nil, 8, "H200", "p-0")},
			why:   "pool p: one node's devices cannot satisfy",
		},
		{
			name:  "a missing DeviceClass selects nothing",
			pods:  claimPods(1, 1, "-", nil),
			pools: []*Pool{devicePool("p", nil, 8, "H200", "p-0")},
			why:   "pool p: one node's devices cannot satisfy",
		},
		{
			name:     "capacity selectors see the template's capacity",
			pods:     claimPods(1, 2, bigMemory, nil),
			pools:    []*Pool{devicePool("p", nil, 2, "H200", "p-0")},
			assigned: []string{"p-0"},
			newNodes: []NewNode{{"p-0", "p"}},
		},
		{
			name:     "an existing node's free devices are used first",
			pods:     claimPods(2, 4, h200, nil),
			bins:     []*Bin{{Name: "n1", Free: rl("cpu", "64"), Devices: devicePool("x", nil, 4, "H200").Devices}},
			pools:    []*Pool{devicePool("p", nil, 8, "H200", "p-0")},
			assigned: []string{"n1", "p-0"},
			newNodes: []NewNode{{"p-0", "p"}},
		},
		{
			name:     "the pool's labels must match the pods' node selector besides devices",
			pods:     claimPods(1, 1, h200, rackA),
			pools:    []*Pool{devicePool("b", map[string]string{"rack": "b"}, 8, "H200", "b-0"), devicePool("c", rackA, 8, "H200", "c-0")},
			assigned: []string{"c-0"},
			newNodes: []NewNode{{"c-0", "c"}},
		},
		{
			name: "the pool's required affinity is honoured alongside devices",
			pods: func() []Pod {
				pods := claimPods(1, 1, h200, nil)
				spec := *pods[0].Spec
				spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
				}}}
				pods[0].Spec = &spec
				return pods
			}(),
			pools:    []*Pool{devicePool("b", map[string]string{"rack": "b"}, 8, "H200", "b-0"), devicePool("a", rackA, 8, "H200", "a-0")},
			assigned: []string{"a-0"},
			newNodes: []NewNode{{"a-0", "a"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Place(tc.pods, tc.bins, tc.pools)
			if tc.why != "" {
				if plan.Complete() || len(plan.NewNodes) > 0 {
					t.Fatalf("want nothing placed, got %+v", plan)
				}
				if got := Shortfall(tc.pods, plan, tc.pools); !strings.Contains(got, tc.why) {
					t.Fatalf("Shortfall = %q, want it to contain %q", got, tc.why)
				}
				return
			}
			if !plan.Complete() {
				t.Fatalf("unplaced %v: %s", plan.Unplaced, Shortfall(tc.pods, plan, tc.pools))
			}
			if !reflect.DeepEqual(plan.Assigned, tc.assigned) {
				t.Errorf("assigned %v, want %v", plan.Assigned, tc.assigned)
			}
			if !reflect.DeepEqual(plan.NewNodes, tc.newNodes) {
				t.Errorf("new nodes %v, want %v", plan.NewNodes, tc.newNodes)
			}
		})
	}
}

func TestSlicesFor(t *testing.T) {
	cp := &berthv1.CapacityPool{Spec: berthv1.CapacityPoolSpec{NodeTemplate: berthv1.NodeTemplate{Devices: []berthv1.TemplateDevices{
		{Name: "gpu", Driver: driver, Count: 2},
		{Name: "nic", Driver: "net.example.com", Count: 1},
		{Name: "mig", Driver: driver, Count: 1},
	}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "p-0", UID: "uid-1"}}
	got := SlicesFor(cp, node)
	if len(got) != 2 {
		t.Fatalf("want one slice per driver, got %d", len(got))
	}
	s := got[0]
	if s.Name != "p-0-gpu.example.com" || s.Spec.Driver != driver || ptr.Deref(s.Spec.NodeName, "") != "p-0" || s.Spec.Pool.Name != "p-0" || s.Spec.Pool.ResourceSliceCount != 1 {
		t.Errorf("unexpected slice %+v", s)
	}
	var names []string
	for _, d := range s.Spec.Devices {
		names = append(names, d.Name)
	}
	if want := []string{"gpu-0", "gpu-1", "mig-0"}; !reflect.DeepEqual(names, want) {
		t.Errorf("devices %v, want %v", names, want)
	}
	if o := s.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].UID != "uid-1" {
		t.Errorf("the slice must be owned by its node, got %+v", o)
	}
}

func TestNodeDevices(t *testing.T) {
	sl := func(node, pool string, gen int64, devs ...string) resourcev1.ResourceSlice {
		s := resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: pool, Generation: gen}}}
		for _, d := range devs {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d})
		}
		return s
	}
	shared := resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: driver, AllNodes: ptr.To(true), Pool: resourcev1.ResourcePool{Name: "net"},
		Devices: []resourcev1.Device{{Name: "x"}}}}
	claim := resourcev1.ResourceClaim{Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Driver: driver, Pool: "n1", Device: "b"}}}}}}
	got := nodeDevices([]resourcev1.ResourceSlice{sl("n1", "n1", 1, "z"), sl("n1", "n1", 2, "b", "a"), sl("n2", "n2", 1, "c"), shared}, []resourcev1.ResourceClaim{claim})
	names := func(devs []NodeDevice) []string {
		var out []string
		for _, d := range devs {
			out = append(out, d.Device.Name)
		}
		return out
	}
	if n1 := names(got["n1"]); !reflect.DeepEqual(n1, []string{"a"}) {
		t.Errorf("n1: %v, want [a]: the old generation and the allocated device are not free", n1)
	}
	if n2 := names(got["n2"]); !reflect.DeepEqual(n2, []string{"c"}) {
		t.Errorf("n2: %v, want [c]", n2)
	}
	if len(got) != 2 {
		t.Errorf("a slice for all nodes belongs to no node: %v", got)
	}
}
