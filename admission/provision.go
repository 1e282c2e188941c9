package admission

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Capacity that can be created. A flavor whose Provisioning mode is IfNeeded or
// Always admits a gang only together with a plan to book its capacity: the
// controller asks the cluster autoscaler with a ProvisioningRequest pinned to the
// chosen domain, and lets the gang start once the capacity is provisioned.
//
// Pools (one per autoscaler node group, from CapacityPools) say where nodes can be
// created: each pool's nodes carry its labels, so a pool lies in one domain of
// every level its labels name. Placement prefers existing free capacity; when none
// of the level's domains has enough, it picks the domain that needs the fewest new
// nodes, filling the domain's existing free capacity first (so partly used domains
// are completed rather than fragmenting fresh ones). New nodes planned for a gang
// are reserved in their pool until the gang is released or its capacity exists
// (the admission then carries no plan, and the engine re-plans onto the real
// nodes), so two gangs are never promised the same node.

// ProvisioningMode says when a flavor books capacity before admitting.
type ProvisioningMode string

const (
	// ProvisionNever admits on existing free capacity only.
	ProvisionNever ProvisioningMode = "Never"
	// ProvisionIfNeeded books capacity only for gangs that do not fit existing free
	// capacity.
	ProvisionIfNeeded ProvisioningMode = "IfNeeded"
	// ProvisionAlways books capacity for every admission (existing capacity through a
	// check, new capacity through a scale-up).
	ProvisionAlways ProvisioningMode = "Always"
)

// ProvisioningClass is how a booking asks for capacity.
type ProvisioningClass string

const (
	// ClassCheckCapacity books capacity that exists.
	ClassCheckCapacity ProvisioningClass = "CheckCapacity"
	// ClassAtomicScaleUp creates the nodes a gang needs, all or none.
	ClassAtomicScaleUp ProvisioningClass = "AtomicScaleUp"
)

// classOf is the class of a booking that must create nodes (scaleUp) or not.
func classOf(scaleUp bool) ProvisioningClass {
	if scaleUp {
		return ClassAtomicScaleUp
	}
	return ClassCheckCapacity
}

// ProvisioningPlan is the capacity an admission books before its gang may start.
type ProvisioningPlan struct {
	// Class says how the capacity is booked: ClassAtomicScaleUp when nodes
	// must be created, ClassCheckCapacity when existing capacity is booked.
	Class ProvisioningClass
	// NewNodes are the nodes to create per pool (empty for an unpinned scale-up on a
	// flavor without pools: the autoscaler chooses).
	NewNodes map[string]int32
	// Flavor whose capacity is booked and whose policy applies: the one flavor of
	// the admission that books (the topology flavor when pinned).
	Flavor string
	// Attempt numbers the booking (the workload's last attempt plus one).
	Attempt int32
	// MaxAttempts is the flavor's, for messages.
	MaxAttempts int32
}

// Pool is capacity that can be created: one autoscaler node group.
type Pool struct {
	// Name of the pool (the CapacityPool).
	Name string
	// Flavor of its nodes.
	Flavor string
	// Labels every node of the pool carries, including the flavor's topology levels.
	Labels map[string]string
	// NodeCapacity is what one new node offers to pods.
	NodeCapacity Resources
	// Available is how many more nodes the pool can create (its maximum minus the
	// nodes it has and those being created).
	Available int32
	// Taints every node of the pool carries (its template's); a pod set that
	// does not tolerate one that excludes cannot be booked in the pool.
	Taints []Taint
}

// topoPool is a pool's capacity and the new nodes reserved in it.
type topoPool struct {
	name     string
	flavor   string
	labels   map[string]string
	node     vec
	avail    int32
	reserved int32
	// taints that exclude, sorted (see compileTaints).
	taints []Taint
	// fits caches which pod set filters admit the pool's nodes, by key.
	fits map[string]bool
}

// UpsertPool creates or updates a pool. Workloads waiting for capacity are
// re-evaluated in the next Cycle.
func (e *Engine) UpsertPool(p Pool) error {
	if p.Name == "" || p.Flavor == "" {
		return errors.New("invalid pool: name and flavor must not be empty")
	}
	if p.Available < 0 {
		return fmt.Errorf("invalid pool %q: available %d must not be negative", p.Name, p.Available)
	}
	node, err := e.names.capacityOf(p.NodeCapacity)
	if err != nil {
		return fmt.Errorf("invalid pool %q: node capacity %w", p.Name, err)
	}
	tp, ok := e.topo.pools[p.Name]
	if !ok {
		tp = &topoPool{name: p.Name}
		e.topo.pools[p.Name] = tp
	}
	e.topo.unlinkPool(tp)
	tp.flavor, tp.node, tp.avail = p.Flavor, node, p.Available
	tp.labels = maps.Clone(p.Labels)
	tp.taints = compileTaints(p.Taints)
	tp.fits = nil
	tf := e.topo.topoFlavorFor(p.Flavor)
	tf.pools = insertByName(tf.pools, tp, func(x *topoPool) string { return x.name })
	tf.invalidate()
	e.wakes.capacityChanged()
	return nil
}

// DeletePool forgets a pool. Nodes reserved in it stay with their workloads.
func (e *Engine) DeletePool(name string) {
	tp, ok := e.topo.pools[name]
	if !ok {
		return
	}
	e.topo.unlinkPool(tp)
	tp.flavor, tp.avail = "", 0
	if tp.reserved == 0 {
		delete(e.topo.pools, name)
	}
	e.wakes.capacityChanged()
}

// provisioningFlavor returns the flavor, among those chosen for w's resource
// groups, that books capacity.
func (topo *topology) provisioningFlavor(c *cqState, flavors []int) (string, *topoFlavor) {
	for gi, fi := range flavors {
		if fi < 0 {
			continue
		}
		name := c.groups[gi].flavors[fi].name
		if tf, ok := topo.flavorTopo[name]; ok && tf.policy.books() {
			return name, tf
		}
	}
	return "", nil
}

// packPools places the remaining pods of w on new nodes of one of the domain's
// pools — the one needing the fewest, then the first by name — as
// cluster-autoscaler's best-effort-atomic class serves a request from one node
// group: a plan spread over two pools would be answered CapacityIsNotFound. It
// returns the nodes per pool, their total, and whether one pool holds every pod
// within its available nodes — with ever, counting the nodes reserved for other
// gangs as available too.
func packPools(tf *topoFlavor, w *wl, key []string, remaining []int32, ever bool) (map[string]int32, int32, bool) {
	var best *topoPool
	var fewest int32
	for _, p := range tf.pools {
		if !inDomain(tf, p.labels, key) {
			continue
		}
		limit := p.avail - p.reserved
		if ever {
			limit = p.avail
		}
		if n, ok := newNodesFor(tf, p, w, remaining, limit); ok && (best == nil || n < fewest) {
			best, fewest = p, n
		}
	}
	if best == nil {
		return nil, 0, false
	}
	return map[string]int32{best.name: fewest}, fewest, true
}

// newNodesFor returns how many new nodes of pool p hold the remaining pods of
// w, each node filled before the next, and false if more than limit would.
func newNodesFor(tf *topoFlavor, p *topoPool, w *wl, remaining []int32, limit int32) (int32, bool) {
	remaining = slices.Clone(remaining)
	onNode := make([]int32, len(w.podSets))
	var n int32
	for slices.ContainsFunc(remaining, func(r int32) bool { return r > 0 }) {
		if n >= limit { // limit is negative when nodes joined that were reserved
			return 0, false
		}
		var used vec
		placed := int32(0)
		clear(onNode)
		for i := range w.podSets {
			ps := &w.podSets[i]
			if remaining[i] == 0 || !ps.admitsPool(tf, p) {
				continue
			}
			k := w.apartRoom(i, onNode, podsThatFit(p.node, nil, ps.req, used, remaining[i]))
			for _, r := range ps.req {
				used.add(r.res, r.amt*int64(k))
			}
			remaining[i] -= k
			onNode[i] += k
			placed += k
		}
		if placed == 0 {
			return 0, false // the pool's nodes cannot take a pod that is left
		}
		n++
	}
	return n, true
}

// planOf returns the provisioning plan of a placement, or nil.
func planOf(p *placement) *ProvisioningPlan {
	if p == nil || !p.provision {
		return nil
	}
	plan := &ProvisioningPlan{Class: classOf(p.scaleUp), NewNodes: map[string]int32{}, Flavor: p.flavor}
	for k, v := range p.newNodes {
		plan.NewNodes[k] = v
	}
	return plan
}

func samePlan(a, b *ProvisioningPlan) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	if a == nil {
		return true
	}
	if a.Class != b.Class || a.Flavor != b.Flavor || a.Attempt != b.Attempt || len(a.NewNodes) != len(b.NewNodes) {
		return false
	}
	for k, v := range a.NewNodes {
		if b.NewNodes[k] != v {
			return false
		}
	}
	return true
}

// backoffUntil reports whether w waits for its next booking attempt at now, and
// lists it to be woken when the time comes.
func (books *bookings) backoffUntil(w *wl) bool {
	if w.notBefore <= books.clock.now {
		return false
	}
	if !w.backingOff {
		w.backingOff = true
		books.backoffs = append(books.backoffs, w)
	}
	return true
}

// wakeBackoffs makes the workloads whose backoff ended at now candidates again.
func (books *bookings) wakeBackoffs() {
	kept := books.backoffs[:0]
	for _, w := range books.backoffs {
		if w.phase != phasePending || books.workloads[w.key] != w {
			w.backingOff = false
			continue
		}
		if w.notBefore > books.clock.now {
			kept = append(kept, w)
			continue
		}
		w.backingOff = false
		books.order.makeFresh(books.queues.cqs[w.cqName], w)
		books.fair.rekey(books.queues.cqs[w.cqName])
	}
	clear(books.backoffs[len(kept):])
	books.backoffs = kept
}

func msgBackoff(notBefore int64) string {
	return "waiting until " + time.Unix(0, notBefore).UTC().Format(time.RFC3339) + " before booking capacity again"
}

// IdleCapacity is free capacity of one resource in one flavor, on schedulable
// nodes and not reserved, while a gang that needs that flavor waits for capacity.
type IdleCapacity struct {
	// Flavor whose nodes have the capacity.
	Flavor string
	// Resource and Amount (milli-units) free.
	Resource ResourceName
	Amount   int64
}

// IdleWhileWaiting reports the free capacity of every flavor for which a gang
// waits for capacity — quota fits but no domain has room (TopologyUnavailable),
// or its admission waits for booked capacity — per resource those gangs request.
// It is the capacity that sits idle because it is in the wrong place or too
// fragmented. Cost: O(waiting gangs + nodes of their flavors).
func (e *Engine) IdleWhileWaiting() []IdleCapacity {
	want := map[string]map[int32]bool{}
	add := func(flavor string, w *wl) {
		if flavor == "" {
			return
		}
		if want[flavor] == nil {
			want[flavor] = map[int32]bool{}
		}
		for _, r := range w.req {
			want[flavor][r.res] = true
		}
	}
	for _, w := range e.topo.topoWaiting {
		if w.phase == phasePending && w.reason == TopologyUnavailable && e.workloads[w.key] == w {
			add(w.waitFlavor, w)
		}
	}
	for w := range e.books.booking {
		if t := w.adm.Topology; t != nil {
			add(t.Flavor, w)
			continue
		}
		for _, u := range w.usage { // the flavors it is charged in
			f := e.names.flavors[u.fr.flavor()]
			if tf, ok := e.topo.flavorTopo[f]; ok && tf.policy.books() {
				add(f, w)
			}
		}
	}
	var out []IdleCapacity
	for _, flavor := range slices.Sorted(maps.Keys(want)) {
		tf, ok := e.topo.flavorTopo[flavor]
		if !ok {
			continue
		}
		for _, r := range slices.Sorted(maps.Keys(want[flavor])) {
			var free int64
			for _, n := range tf.nodes {
				free += max(0, n.left(r, nil))
			}
			out = append(out, IdleCapacity{Flavor: flavor, Resource: e.names.resources[r], Amount: free})
		}
	}
	return out
}

// Booking reports whether the workload is admitted with capacity still being
// booked.
func (e *Engine) Booking(key WorkloadKey) bool { return e.books.inFlight(key) }

// inFlight reports whether the workload is admitted with capacity still being
// booked.
func (books *bookings) inFlight(key WorkloadKey) bool {
	w, ok := books.workloads[key]
	if !ok {
		return false
	}
	_, booking := books.booking[w]
	return booking
}
