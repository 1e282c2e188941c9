package autoscaler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Pod is one pod a ProvisioningRequest asks for.
type Pod struct {
	// PodSet is the index of the pod set in the request's spec.podSets.
	PodSet int
	// Spec is the pod set's template spec: selectors and tolerations.
	Spec *corev1.PodSpec
	// Requests is PodRequests(Spec).
	Requests corev1.ResourceList
}

// Bin is an existing node pods can be placed on.
type Bin struct {
	// Name is the node's name.
	Name string
	// Labels and Taints are the node's.
	Labels map[string]string
	Taints []corev1.Taint
	// Free is allocatable minus the requests of pods bound to the node and
	// minus capacity booked by other requests. Place consumes it.
	Free corev1.ResourceList
}

// Pool is a node group Place may open new nodes from.
type Pool struct {
	// Name is the CapacityPool's name.
	Name string
	// Labels (including the pool label) and Taints every new node carries.
	Labels map[string]string
	Taints []corev1.Taint
	// Allocatable is what one new node offers.
	Allocatable corev1.ResourceList
	// Names are the names of the nodes that may still be created, in the
	// order they are used; there are as many as the pool has room for under
	// its maxNodes.
	Names []string
	// Max is the pool's maxNodes, for messages.
	Max int32
	// OutOfStock: the pool's cloud has no capacity (it offers no name).
	OutOfStock bool
}

// NewNode is a node Place decided to create.
type NewNode struct {
	// Name is taken from the pool's Names.
	Name string
	// Pool is the pool it is created from.
	Pool string
}

// Plan is where Place put each pod.
type Plan struct {
	// Assigned holds, per pod (same index as the pods given to Place), the
	// name of the node it goes to; empty when it went nowhere.
	Assigned []string
	// NewNodes are the nodes to create, in the order Place opened them.
	NewNodes []NewNode
	// Unplaced are the indexes of the pods that fit nowhere, ascending.
	Unplaced []int
}

// Complete reports whether every pod was placed.
func (p Plan) Complete() bool { return len(p.Unplaced) == 0 }

// Place puts pods first fit decreasing: the largest pod first, each on the
// first existing bin (in the order given) that admits it and has room, else
// on the first node already opened from a pool, else on a new node from the
// first pool (in the order given) that admits it, has a name left and whose
// empty node has room. With no pools it answers from existing capacity
// only. It consumes the bins' Free and the pools' Names; it never fails:
// pods that fit nowhere are listed in Unplaced.
func Place(pods []Pod, bins []*Bin, pools []*Pool) Plan {
	plan := Plan{Assigned: make([]string, len(pods))}
	var opened []*Bin
	for _, i := range largestFirst(pods) {
		pod := &pods[i]
		if b := firstFit(pod, bins); b != nil {
			take(b.Free, pod.Requests)
			plan.Assigned[i] = b.Name
			continue
		}
		if b := firstFit(pod, opened); b != nil {
			take(b.Free, pod.Requests)
			plan.Assigned[i] = b.Name
			continue
		}
		b, pool := open(pod, pools)
		if b == nil {
			plan.Unplaced = append(plan.Unplaced, i)
			continue
		}
		opened = append(opened, b)
		plan.NewNodes = append(plan.NewNodes, NewNode{Name: b.Name, Pool: pool})
		take(b.Free, pod.Requests)
		plan.Assigned[i] = b.Name
	}
	slices.Sort(plan.Unplaced)
	return plan
}

// firstFit is the first bin that admits the pod and has room for it.
func firstFit(pod *Pod, bins []*Bin) *Bin {
	for _, b := range bins {
		if Admits(pod.Spec, b.Name, b.Labels, b.Taints) && fits(pod.Requests, b.Free) {
			return b
		}
	}
	return nil
}

// open takes a name from the first pool that can hold the pod and returns
// the new, empty node and its pool's name.
func open(pod *Pod, pools []*Pool) (*Bin, string) {
	for _, p := range pools {
		if len(p.Names) == 0 || !Admits(pod.Spec, "", p.Labels, p.Taints) || !fits(pod.Requests, p.Allocatable) {
			continue
		}
		b := &Bin{Name: p.Names[0], Labels: p.Labels, Taints: p.Taints, Free: p.Allocatable.DeepCopy()}
		p.Names = p.Names[1:]
		return b, p.Name
	}
	return nil, ""
}

// largestFirst orders pod indexes by decreasing requests: extended
// resources (GPUs) by name, then cpu, then memory, compared in that order;
// ties keep pod set and then index order, so the order is total.
func largestFirst(pods []Pod) []int {
	names := map[corev1.ResourceName]bool{}
	for _, p := range pods {
		for n := range p.Requests {
			if n != corev1.ResourceCPU && n != corev1.ResourceMemory {
				names[n] = true
			}
		}
	}
	keys := make([]corev1.ResourceName, 0, len(names)+2)
	for n := range names {
		keys = append(keys, n)
	}
	slices.Sort(keys)
	keys = append(keys, corev1.ResourceCPU, corev1.ResourceMemory)
	order := make([]int, len(pods))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := pods[order[a]], pods[order[b]]
		for _, k := range keys {
			qa, qb := pa.Requests[k], pb.Requests[k]
			if c := qa.Cmp(qb); c != 0 {
				return c > 0
			}
		}
		if pa.PodSet != pb.PodSet {
			return pa.PodSet < pb.PodSet
		}
		return order[a] < order[b]
	})
	return order
}

// Shortfall explains an incomplete plan: per pod set, how many pods fit
// nowhere and, for each pool whose nodes would admit them, why it could not
// take them.
func Shortfall(pods []Pod, plan Plan, pools []*Pool) string {
	unplaced := map[int]int{}
	total := map[int]int{}
	spec := map[int]*Pod{}
	for i := range pods {
		total[pods[i].PodSet]++
		spec[pods[i].PodSet] = &pods[i]
	}
	for _, i := range plan.Unplaced {
		unplaced[pods[i].PodSet]++
	}
	sets := make([]int, 0, len(unplaced))
	for s := range unplaced {
		sets = append(sets, s)
	}
	slices.Sort(sets)
	var parts []string
	for _, s := range sets {
		msg := fmt.Sprintf("pod set %d: %d of %d pods do not fit", s, unplaced[s], total[s])
		var why []string
		for _, p := range pools {
			if !Admits(spec[s].Spec, "", p.Labels, p.Taints) {
				continue
			}
			switch {
			case p.OutOfStock:
				why = append(why, fmt.Sprintf("pool %s: out of stock", p.Name))
			case !fits(spec[s].Requests, p.Allocatable):
				why = append(why, fmt.Sprintf("pool %s: one node is too small for one pod", p.Name))
			default:
				why = append(why, fmt.Sprintf("pool %s: %d more nodes allowed (maxNodes %d, counting existing and in-flight nodes)", p.Name, len(p.Names), p.Max))
			}
		}
		if pools != nil && len(why) == 0 {
			why = append(why, "no CapacityPool's node template matches the pods' node selector, affinity and tolerations")
		}
		if len(why) > 0 {
			msg += " (" + strings.Join(why, "; ") + ")"
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}
