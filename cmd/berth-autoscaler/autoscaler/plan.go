package autoscaler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/cmd/internal/autoscale"
)

// Pod is one pod a ProvisioningRequest asks for.
type Pod struct {
	// PodSet is the index of the pod set in the request's spec.podSets.
	PodSet int
	// Spec is the pod set's template spec: selectors and tolerations.
	Spec *corev1.PodSpec
	// Requests is PodRequests(Spec).
	Requests corev1.ResourceList
	// Devices are the requests of the pod's ResourceClaims, each to be
	// satisfied by devices of the node the pod goes to.
	Devices []DeviceRequest
	// Labels are the pod set's template labels, which the request's pods'
	// anti-affinity selects.
	Labels map[string]string
}

// Bin is an existing node pods can be placed on, or a new one.
type Bin struct {
	// Name is the node's name.
	Name string
	// Labels and Taints are the node's.
	Labels map[string]string
	Taints []corev1.Taint
	// Free is allocatable minus the requests of pods bound to the node and
	// minus capacity booked by other requests. Place consumes it.
	Free corev1.ResourceList
	// Devices are the node's DRA devices not allocated to claims; Used
	// marks those booked or placed. Place consumes them.
	Devices []NodeDevice
	Used    []bool
	// fresh: a node the scale-up would create. It has no name yet for a
	// pod's matchFields, as cluster-autoscaler's template node has none of
	// the node to come.
	fresh bool
	// placed are the request's pods Place put on the bin.
	placed []*Pod
}

// devicesFor picks devices of the bin for the pod's claims; false when
// they cannot be satisfied.
func (b *Bin) devicesFor(pod *Pod) ([]int, bool) {
	if len(pod.Devices) == 0 {
		return nil, true
	}
	return allocate(pod.Devices, b.Devices, b.Used)
}

// take places the pod on the bin if the bin admits it and has room for
// its requests, a pod slot and its claims' devices, and is not ruled out
// by anti-affinity with the request's pods already there.
func (b *Bin) take(pod *Pod) bool {
	name := b.Name
	if b.fresh {
		name = ""
	}
	if !Admits(pod.Spec, name, b.Labels, b.Taints) || !fits(pod.Requests, b.Free) || b.apartFrom(pod) {
		return false
	}
	devices, ok := b.devicesFor(pod)
	if !ok {
		return false
	}
	b.put(pod, devices)
	return true
}

// put places the pod on the bin: its requests and pod slot leave Free,
// and the devices picked for it are used.
func (b *Bin) put(pod *Pod, devices []int) {
	take(b.Free, pod.Requests)
	b.use(devices)
	b.placed = append(b.placed, pod)
}

// use marks devices of the bin used.
func (b *Bin) use(devices []int) {
	if len(devices) > 0 && b.Used == nil {
		b.Used = make([]bool, len(b.Devices))
	}
	for _, i := range devices {
		b.Used[i] = true
	}
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
	// Devices are the DRA devices one new node publishes (its node
	// template's devices).
	Devices []NodeDevice
	// Names are the names of the nodes that may still be created, in the
	// order they are used; there are as many as the pool has room for under
	// its maxNodes.
	Names []string
	// Max is the pool's maxNodes, for messages.
	Max int32
	// OutOfStock: the pool's cloud has no capacity. The autoscaler only
	// learns it by trying: the pool is an option like any other, and a
	// scale-up the expander gives it fails.
	OutOfStock bool
	// BackedOff: the pool failed to grow lately and is no option until its
	// node group backoff ends.
	BackedOff bool
}

// open is the pool's i-th new node, false when it has no room for it.
func (p *Pool) open(i int) (*Bin, bool) {
	if i >= len(p.Names) {
		return nil, false
	}
	return &Bin{Name: p.Names[i], Labels: p.Labels, Taints: p.Taints, Free: p.Allocatable.DeepCopy(), Devices: p.Devices, fresh: true}, true
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
	// Chosen is the expander's choice of pool for the pods no existing
	// node holds; nil when they all fit or no pool can hold all of them.
	// When its pool is out of stock the plan opens nothing.
	Chosen *autoscale.Option
}

// Complete reports whether every pod was placed.
func (p Plan) Complete() bool { return len(p.Unplaced) == 0 }

// Place puts pods largest first, each on the first existing bin (in the
// order given) that takes it. The pods left go to new nodes of one pool,
// as cluster-autoscaler's best-effort-atomic class grows one node group
// per request, all or nothing: of the pools not backed off that can hold
// all of them (each pod on the first node already opened, else on a new
// one), the least-waste expander chooses. If none can, or the chosen
// pool is out of stock, no node is opened and they are Unplaced. With no
// pools it answers from existing capacity only. It consumes the bins'
// Free and the chosen pool's Names; it never fails.
func Place(pods []Pod, bins []*Bin, pools []*Pool) Plan {
	return place(pods, bins, pools, true)
}

// PlaceSome is Place for an ordinary scale-up, as cluster-autoscaler
// runs for pending pods (and a CapacityBuffer's fake pods): a pool is an
// option when its new nodes, up to its room, hold at least one of the
// pods left; the expander weighs each option by the pods it holds, and
// the pods the chosen pool cannot hold stay Unplaced.
func PlaceSome(pods []Pod, bins []*Bin, pools []*Pool) Plan {
	return place(pods, bins, pools, false)
}

func place(pods []Pod, bins []*Bin, pools []*Pool, atomic bool) Plan {
	plan := Plan{Assigned: make([]string, len(pods))}
	order := largestFirst(pods)
	ordered := make([]*Pod, len(order))
	for k, i := range order {
		ordered[k] = &pods[i]
	}
	var left []int
	var rest []*Pod
	for k, at := range autoscale.FirstFit(ordered, bins, (*Bin).take) {
		if at < 0 {
			left, rest = append(left, order[k]), append(rest, ordered[k])
			continue
		}
		plan.Assigned[order[k]] = bins[at].Name
	}
	if len(left) == 0 {
		return plan
	}
	best, pool, opened, at := expand(rest, pools, atomic)
	if best != nil {
		plan.Chosen = best
	}
	if best == nil || pool.OutOfStock {
		plan.Unplaced = left
		slices.Sort(plan.Unplaced)
		return plan
	}
	pool.Names = pool.Names[len(opened):]
	for _, b := range opened {
		plan.NewNodes = append(plan.NewNodes, NewNode{Name: b.Name, Pool: pool.Name})
	}
	for k, i := range at {
		if i < 0 {
			plan.Unplaced = append(plan.Unplaced, left[k])
			continue
		}
		plan.Assigned[left[k]] = opened[i].Name
	}
	slices.Sort(plan.Unplaced)
	return plan
}

// expand runs the estimator over every pool not backed off for pods and
// lets the least-waste expander choose: the option, its pool, the new
// nodes it opens and, per pod, the index of its new node (-1: none).
// best is nil when no pool holds all pods (atomic) or any (not atomic).
func expand(pods []*Pod, pools []*Pool, atomic bool) (best *autoscale.Option, pool *Pool, opened []*Bin, at []int) {
	var options []autoscale.Option
	var chosen []*Pool
	var nodes [][]*Bin
	var placed [][]int
	for _, p := range pools {
		if p.BackedOff {
			continue
		}
		n, where, ok := autoscale.Estimate(pods, p.open, (*Bin).take, atomic)
		if !ok || len(n) == 0 {
			continue
		}
		var held []*Pod
		for k, i := range where {
			if i >= 0 {
				held = append(held, pods[k])
			}
		}
		options = append(options, optionOf(p, held, len(n)))
		chosen, nodes, placed = append(chosen, p), append(nodes, n), append(placed, where)
	}
	i := autoscale.Best(options)
	if i < 0 {
		return nil, nil, nil, nil
	}
	return &options[i], chosen[i], nodes[i], placed[i]
}

// optionOf is the expander's view of a scale-up of pool by nodes new
// nodes for pods.
func optionOf(pool *Pool, pods []*Pod, nodes int) autoscale.Option {
	o := autoscale.Option{Group: pool.Name, Nodes: nodes, Pods: len(pods), OutOfStock: pool.OutOfStock,
		NodeCPU: pool.Allocatable.Cpu().MilliValue(), NodeMemory: pool.Allocatable.Memory().Value()}
	for _, p := range pods {
		o.CPU += p.Requests.Cpu().MilliValue()
		o.Memory += p.Requests.Memory().Value()
	}
	return o
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
			case p.BackedOff:
				why = append(why, fmt.Sprintf("pool %s: backed off after it failed to grow", p.Name))
			case !fits(spec[s].Requests, p.Allocatable):
				why = append(why, fmt.Sprintf("pool %s: one node is too small for one pod", p.Name))
			case !fitsDevices(spec[s], p.Devices):
				why = append(why, fmt.Sprintf("pool %s: one node's devices cannot satisfy one pod's resource claims (%s)", p.Name, requestNames(spec[s].Devices)))
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

// fitsDevices reports whether fresh devices satisfy one pod's claims.
func fitsDevices(pod *Pod, devices []NodeDevice) bool {
	_, ok := allocate(pod.Devices, devices, nil)
	return ok
}

func requestNames(reqs []DeviceRequest) string {
	names := make([]string, len(reqs))
	for i, r := range reqs {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}
