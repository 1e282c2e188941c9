package autoscaler

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func gpuPods(set int, n int, gpus string, selector map[string]string) []Pod {
	spec := &corev1.PodSpec{NodeSelector: selector}
	var out []Pod
	for range n {
		out = append(out, Pod{PodSet: set, Spec: spec, Requests: rl("nvidia.com/gpu", gpus, "cpu", "1")})
	}
	return out
}

func bin(name, gpus string, labels map[string]string) *Bin {
	return &Bin{Name: name, Labels: labels, Free: rl("nvidia.com/gpu", gpus, "cpu", "64", "pods", "110")}
}

func pool(name string, labels map[string]string, names ...string) *Pool {
	return &Pool{Name: name, Labels: labels, Allocatable: rl("nvidia.com/gpu", "8", "cpu", "64"), Names: names, Max: int32(len(names))}
}

var reservedTaint = corev1.Taint{Key: "example.com/reserved", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// tainted gives p's template taints.
func tainted(p *Pool, taints ...corev1.Taint) *Pool {
	p.Taints = taints
	return p
}

// tolerate gives pods (which share one spec) tolerations.
func tolerate(pods []Pod, tols ...corev1.Toleration) []Pod {
	spec := pods[0].Spec.DeepCopy()
	spec.Tolerations = tols
	for i := range pods {
		pods[i].Spec = spec
	}
	return pods
}

func TestPlace(t *testing.T) {
	rackA := map[string]string{"rack": "a"}
	rackB := map[string]string{"rack": "b"}
	cases := []struct {
		name     string
		pods     []Pod
		bins     []*Bin
		pools    []*Pool
		assigned []string
		newNodes []NewNode
		unplaced []int
		// chosen is the pool the expander chose ("" for none).
		chosen string
	}{
		{
			name:     "fits existing nodes first fit",
			pods:     gpuPods(0, 3, "4", nil),
			bins:     []*Bin{bin("n1", "8", nil), bin("n2", "8", nil)},
			assigned: []string{"n1", "n1", "n2"},
		},
		{
			name:     "largest first: the big pod takes the big node",
			pods:     append(gpuPods(0, 1, "2", nil), gpuPods(1, 1, "8", nil)...),
			bins:     []*Bin{bin("n1", "2", nil), bin("n2", "8", nil)},
			assigned: []string{"n1", "n2"},
		},
		{
			name:     "does not fit without pools",
			pods:     gpuPods(0, 3, "8", nil),
			bins:     []*Bin{bin("n1", "8", nil), bin("n2", "4", nil)},
			assigned: []string{"n1", "", ""},
			unplaced: []int{1, 2},
		},
		{
			name:     "selector skips nodes of another rack",
			pods:     gpuPods(0, 1, "8", rackB),
			bins:     []*Bin{bin("n1", "8", rackA), bin("n2", "8", rackB)},
			assigned: []string{"n2"},
		},
		{
			name:     "scale up in the matching pool only, filling opened nodes",
			pods:     gpuPods(0, 4, "4", rackB),
			pools:    []*Pool{pool("a", rackA, "a-0", "a-1"), pool("b", rackB, "b-0", "b-1")},
			assigned: []string{"b-0", "b-0", "b-1", "b-1"},
			newNodes: []NewNode{{Name: "b-0", Pool: "b"}, {Name: "b-1", Pool: "b"}},
			chosen:   "b",
		},
		{
			// As cluster-autoscaler runs the scheduler's predicates against
			// the template node: a template taint the pods do not tolerate
			// keeps them off every node the pool could create.
			name:     "a pool whose template taint the pods do not tolerate creates nothing for them",
			pods:     gpuPods(0, 2, "8", rackA),
			pools:    []*Pool{tainted(pool("a", rackA, "a-0", "a-1"), reservedTaint)},
			assigned: []string{"", ""},
			unplaced: []int{0, 1},
		},
		{
			name:     "pods that tolerate the template taint get the pool's nodes",
			pods:     tolerate(gpuPods(0, 2, "8", rackA), corev1.Toleration{Key: reservedTaint.Key, Operator: corev1.TolerationOpExists}),
			pools:    []*Pool{tainted(pool("a", rackA, "a-0", "a-1"), reservedTaint)},
			assigned: []string{"a-0", "a-1"},
			newNodes: []NewNode{{Name: "a-0", Pool: "a"}, {Name: "a-1", Pool: "a"}},
			chosen:   "a",
		},
		{
			name:     "existing capacity before new nodes",
			pods:     gpuPods(0, 2, "8", nil),
			bins:     []*Bin{bin("n1", "8", nil)},
			pools:    []*Pool{pool("a", nil, "a-0")},
			assigned: []string{"n1", "a-0"},
			newNodes: []NewNode{{Name: "a-0", Pool: "a"}},
			chosen:   "a",
		},
		{
			name:     "maxNodes: a pool that cannot hold all of the rest opens nothing",
			pods:     gpuPods(0, 3, "8", nil),
			pools:    []*Pool{pool("a", nil, "a-0", "a-1")},
			assigned: []string{"", "", ""},
			unplaced: []int{0, 1, 2},
		},
		{
			// cluster-autoscaler's best-effort-atomic class grows one node
			// group per request.
			name:     "one node group: two pools that only together hold the pods open nothing",
			pods:     gpuPods(0, 2, "8", nil),
			pools:    []*Pool{pool("a", nil, "a-0"), pool("b", nil, "b-0")},
			assigned: []string{"", ""},
			unplaced: []int{0, 1},
		},
		{
			name: "one node group: the pool that holds the rest with the fewest nodes",
			pods: gpuPods(0, 2, "8", nil),
			pools: []*Pool{pool("a", nil, "a-0", "a-1"),
				{Name: "b", Allocatable: rl("nvidia.com/gpu", "16", "cpu", "64"), Names: []string{"b-0", "b-1"}, Max: 2}},
			assigned: []string{"b-0", "b-0"},
			newNodes: []NewNode{{Name: "b-0", Pool: "b"}},
			chosen:   "b",
		},
		{
			// 2 pods of 16 cpu: pool a's one node would leave 32 of 64
			// cpu unused, pool b's two nodes 8 of 40.
			name: "least waste: the pool whose nodes the pods fill best, though it needs more nodes",
			pods: []Pod{{Spec: &corev1.PodSpec{}, Requests: rl("cpu", "16")}, {Spec: &corev1.PodSpec{}, Requests: rl("cpu", "16")}},
			pools: []*Pool{{Name: "a", Allocatable: rl("cpu", "64"), Names: []string{"a-0", "a-1"}, Max: 2},
				{Name: "b", Allocatable: rl("cpu", "20"), Names: []string{"b-0", "b-1"}, Max: 2}},
			assigned: []string{"b-0", "b-1"},
			newNodes: []NewNode{{Name: "b-0", Pool: "b"}, {Name: "b-1", Pool: "b"}},
			chosen:   "b",
		},
		{
			// The autoscaler learns of a stockout only when the cloud
			// fails to grow the group it chose.
			name:     "out of stock: the chosen pool opens nothing, though another could hold the pods",
			pods:     gpuPods(0, 1, "8", nil),
			pools:    []*Pool{{Name: "a", Allocatable: rl("nvidia.com/gpu", "8", "cpu", "64"), Names: []string{"a-0"}, Max: 1, OutOfStock: true}, pool("b", nil, "b-0")},
			assigned: []string{""},
			unplaced: []int{0},
			chosen:   "a",
		},
		{
			name:     "a backed-off pool is no option",
			pods:     gpuPods(0, 1, "8", nil),
			pools:    []*Pool{{Name: "a", Allocatable: rl("nvidia.com/gpu", "8", "cpu", "64"), Names: []string{"a-0"}, Max: 1, BackedOff: true}, pool("b", nil, "b-0")},
			assigned: []string{"b-0"},
			newNodes: []NewNode{{Name: "b-0", Pool: "b"}},
			chosen:   "b",
		},
		{
			name:     "a pod larger than a pool's node",
			pods:     gpuPods(0, 1, "16", nil),
			pools:    []*Pool{pool("a", nil, "a-0")},
			assigned: []string{""},
			unplaced: []int{0},
		},
		{
			name:     "pod slots count",
			pods:     gpuPods(0, 2, "0", nil),
			bins:     []*Bin{{Name: "n1", Free: rl("cpu", "64", "pods", "1")}, {Name: "n2", Free: rl("cpu", "64", "pods", "1")}},
			assigned: []string{"n1", "n2"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Place(tc.pods, tc.bins, tc.pools)
			if !reflect.DeepEqual(plan.Assigned, tc.assigned) {
				t.Errorf("assigned %v, want %v", plan.Assigned, tc.assigned)
			}
			if !reflect.DeepEqual(plan.NewNodes, tc.newNodes) {
				t.Errorf("new nodes %v, want %v", plan.NewNodes, tc.newNodes)
			}
			if !reflect.DeepEqual(plan.Unplaced, tc.unplaced) {
				t.Errorf("unplaced %v, want %v", plan.Unplaced, tc.unplaced)
			}
			chosen := ""
			if plan.Chosen != nil {
				chosen = plan.Chosen.Group
			}
			if chosen != tc.chosen {
				t.Errorf("chosen %q, want %q", chosen, tc.chosen)
			}
			if plan.Complete() != (len(tc.unplaced) == 0) {
				t.Errorf("Complete() = %v", plan.Complete())
			}
		})
	}
}

func TestShortfall(t *testing.T) {
	pods := gpuPods(0, 3, "8", map[string]string{"rack": "a"})
	pools := []*Pool{pool("a", map[string]string{"rack": "a"}, "a-0", "a-1"), pool("b", map[string]string{"rack": "b"}, "b-0")}
	plan := Place(pods, nil, pools)
	got := Shortfall(pods, plan, pools)
	for _, want := range []string{"pod set 0: 3 of 3 pods do not fit", "pool a: 2 more nodes allowed (maxNodes 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not contain %q", got, want)
		}
	}
	if strings.Contains(got, "pool b") {
		t.Errorf("%q names a pool the pods do not match", got)
	}
	none := gpuPods(0, 1, "8", map[string]string{"rack": "c"})
	if got := Shortfall(none, Place(none, nil, pools), pools); !strings.Contains(got, "no CapacityPool") {
		t.Errorf("%q does not say no pool matches", got)
	}
}
