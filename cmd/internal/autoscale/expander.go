package autoscale

import "strings"

// Option is one node group's scale-up, as the expander weighs it.
type Option struct {
	// Group is the node group's name (a CapacityPool's).
	Group string
	// Nodes is how many new nodes the estimator needs; Pods how many pods
	// they hold.
	Nodes, Pods int
	// NodeCPU and NodeMemory are what one new node offers, CPU and CPU of
	// the pods in the same unit (milli-cpu), memory likewise.
	NodeCPU, NodeMemory int64
	CPU, Memory         int64
	// OutOfStock: the cloud cannot grow the group now. The autoscaler does
	// not know it before it tries, so the group is an option like any
	// other; Decide turns its choice into StockedOut.
	OutOfStock bool
}

// Waste is least-waste's score of o (expander/waste): the share of the
// new nodes' CPU the pods leave unused plus that of their memory. A
// resource the node does not offer adds nothing, where
// cluster-autoscaler would divide by zero.
func (o Option) Waste() float64 {
	unused := func(offered, used int64) float64 {
		total := float64(offered) * float64(o.Nodes)
		if total <= 0 {
			return 0
		}
		return (total - float64(used)) / total
	}
	return unused(o.NodeCPU, o.CPU) + unused(o.NodeMemory, o.Memory)
}

// Best is the index of the option the least-waste expander picks, -1 when
// there is none. cluster-autoscaler breaks a tie at random; the model
// breaks it the same way every time: more pods, then fewer nodes, then
// the group's name.
func Best(options []Option) int {
	best := -1
	for i := range options {
		if best < 0 || better(&options[i], &options[best]) {
			best = i
		}
	}
	return best
}

// better orders options for Best.
func better(a, b *Option) bool {
	if wa, wb := a.Waste(), b.Waste(); wa != wb {
		return wa < wb
	}
	if a.Pods != b.Pods {
		return a.Pods > b.Pods
	}
	if a.Nodes != b.Nodes {
		return a.Nodes < b.Nodes
	}
	return strings.Compare(a.Group, b.Group) < 0
}
