package autoscale

import "testing"

func TestBest(t *testing.T) {
	// Pods of 4 cpu and 16 memory each on groups of different shapes.
	small := Option{Group: "small", NodeCPU: 8, NodeMemory: 32}
	big := Option{Group: "big", NodeCPU: 32, NodeMemory: 128}
	with := func(o Option, nodes, pods int) Option {
		o.Nodes, o.Pods, o.CPU, o.Memory = nodes, pods, int64(4*pods), int64(16*pods)
		return o
	}
	for _, tc := range []struct {
		name    string
		options []Option
		want    string
	}{
		{"none", nil, ""},
		{"least waste wins over fewest nodes", []Option{with(big, 1, 6), with(small, 3, 6)}, "small"},
		{"fewest nodes when the waste ties", []Option{with(small, 3, 6), with(Option{Group: "a", NodeCPU: 12, NodeMemory: 48}, 2, 6)}, "a"},
		{"more pods when the waste ties", []Option{with(small, 1, 2), with(big, 2, 16)}, "big"},
		{"the name last", []Option{with(Option{Group: "b", NodeCPU: 8, NodeMemory: 32}, 1, 2), with(small, 1, 2), with(Option{Group: "a", NodeCPU: 8, NodeMemory: 32}, 1, 2)}, "a"},
		{"GPUs do not count, as in cluster-autoscaler", []Option{with(Option{Group: "gpu-only", NodeCPU: 8, NodeMemory: 32}, 1, 1), with(small, 1, 1)}, "gpu-only"},
		{"a resource the node does not offer adds no waste", []Option{{Group: "x", Nodes: 1, Pods: 1, NodeCPU: 4, CPU: 4}, with(small, 1, 1)}, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if i := Best(tc.options); i >= 0 {
				got = tc.options[i].Group
			}
			if got != tc.want {
				t.Errorf("Best = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWaste(t *testing.T) {
	for _, tc := range []struct {
		o    Option
		want float64
	}{
		{Option{Nodes: 1, NodeCPU: 8, NodeMemory: 32, CPU: 8, Memory: 32}, 0},
		{Option{Nodes: 2, NodeCPU: 8, NodeMemory: 32, CPU: 8, Memory: 16}, 0.5 + 0.75},
		{Option{Nodes: 1}, 0},
	} {
		if got := tc.o.Waste(); got != tc.want {
			t.Errorf("%+v: Waste = %v, want %v", tc.o, got, tc.want)
		}
	}
}
