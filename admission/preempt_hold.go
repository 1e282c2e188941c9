package admission

import (
	"fmt"
	"maps"
	"slices"
)

// What a preemptor that needs capacity holds while it waits for its victims
// (preempt_topology.go), and its admission once they are gone: the domain's
// capacity claimed, the victims' placements kept, the planned placement.

// fitIn is w's placement in the domain key of flavor tf on the capacity known
// now — with the nodes its pools can still create, pools — or nil. It is one
// domain of search, judged the same way.
func (topo *topology) fitIn(tf *topoFlavor, w *wl, key []string, pools bool) *placement {
	if len(key) > 0 && !mayHold(tf, w, key, pools) {
		return nil
	}
	pk := topo.packNodes(tf, w, key, w.dominant(), false, false)
	var newNodes map[string]int32
	if pk.remaining != nil {
		var ok bool
		if !pools {
			return nil
		}
		if newNodes, _, ok = packPools(tf, w, key, pk.remaining, false); !ok {
			return nil
		}
	}
	p := &placement{shares: pk.shares, newNodes: newNodes}
	if l := len(key) - 1; l >= 0 {
		p.assign = TopologyAssignment{Level: tf.levels[l], Levels: tf.levels[:l+1], Domain: slices.Clone(key)}
	}
	return p
}

// preemptedFor is the placement of a preemptor, served once its victims are
// gone, in the domain it preempted for on flavor name, or nil. Its hold was
// released just before, so the domain is as its plan saw it. The flags are
// placeAvoiding's.
func (topo *topology) preemptedFor(tf *topoFlavor, name string, w *wl) *placement {
	h := w.hold
	if h == nil || h.flavor != name || len(h.held) > 0 || h.level >= len(tf.levels) ||
		(h.level >= 0 && tf.levels[h.level] != h.levelKey) {
		return nil
	}
	// Only a domain placement would try for w (its request may have changed).
	switch {
	case w.topo == nil:
		if h.level >= 0 {
			return nil
		}
	case slices.Index(tf.levels, w.topo.Level) < h.level:
		return nil
	case w.topo.Mode == TopologyRequired && slices.Index(tf.levels, w.topo.Level) != h.level:
		return nil
	}
	// The planned placement, while it still fits: more capacity than the plan
	// saw (a workload that finished meanwhile) can make packing the domain
	// again come out otherwise, and worse.
	var p *placement
	if h.planned != nil && samePodSets(h.podSets, w.podSets) && topo.stillFits(tf, name, w, h.planned) {
		p = &placement{assign: h.planned.assign, shares: h.planned.shares, newNodes: maps.Clone(h.planned.newNodes)}
	} else if p = topo.fitIn(tf, w, h.key, h.pools); p == nil {
		return nil
	}
	if h.level < 0 {
		p.shares = nil // unpinned: nothing reserved on nodes
	}
	switch {
	case len(p.newNodes) > 0:
		p.provision, p.scaleUp, p.flavor = true, true, name
	case tf.policy.Mode == ProvisionAlways:
		p.provision, p.flavor = true, name
	case h.level < 0:
		return &placement{}
	}
	p.assign.Flavor = name
	return p
}

// stillFits reports whether the capacity a placement planned for w on flavor
// name is still there: its nodes and pools belong to the flavor, admit pods
// of w and have that much left.
func (topo *topology) stillFits(tf *topoFlavor, name string, w *wl, p *placement) bool {
	for _, s := range p.shares {
		n, ok := topo.nodes[s.node]
		if !ok || !slices.Contains(n.flavors, name) || !w.admitsAny(tf, n) {
			return false
		}
		for _, r := range s.amt {
			if n.free.at(r.res)-n.reserved.at(r.res) < r.amt {
				return false
			}
		}
	}
	for pool, k := range p.newNodes {
		pl, ok := topo.pools[pool]
		if !ok || pl.flavor != name || !w.admitsAnyPool(tf, pl) || pl.avail-pl.reserved < k {
			return false
		}
	}
	return true
}

// samePodSets reports whether two specs' pod sets are the same.
func samePodSets(a, b []podSetSpec) bool {
	return slices.EqualFunc(a, b, func(x, y podSetSpec) bool {
		return x.name == y.name && x.count == y.count && slices.Equal(x.req, y.req) && sameConstraints(x, y)
	})
}

// shift reserves a placement's capacity (sign 1) or returns it (-1) for a
// what-if: unlike reserve, it never forgets a deleted node or pool.
func (topo *topology) shift(p *placement, sign int64) {
	if p == nil {
		return
	}
	for _, s := range p.shares {
		n, ok := topo.nodes[s.node]
		if !ok {
			continue
		}
		before := n.leftVec()
		for _, r := range s.amt {
			n.reserved.add(r.res, sign*r.amt)
		}
		topo.capacityMoved(n, before)
	}
	for name, k := range p.newNodes {
		if pl, ok := topo.pools[name]; ok {
			pl.reserved += int32(sign) * k
		}
	}
}

// holdDomain claims, for a preemptor that now waits for its victims, the
// capacity its plan counts on besides the victims': on each node its plan
// uses, what it places there beyond the victims' capacity on the node, and in
// a pool, the new nodes it needs beyond those its victims booked there. The
// claim never exceeds what is free: the plan placed the gang on what is free
// plus the victims' capacity. With the victims' placements, passed to the hold
// as they go, the planned placement is all there when the hold is released.
func (pre *preemption) holdDomain(w *wl, p capPlan) {
	h := p.target
	w.hold = h
	if !h.check {
		return // quota is all it counts on: held as for any preemptor
	}
	tf := pre.topo.flavorTopo[h.flavor]
	for _, v := range p.victims {
		pre.topo.shift(v.w.placed, -1)
	}
	h.planned = pre.topo.fitIn(tf, w, h.key, h.pools)
	for i := len(p.victims) - 1; i >= 0; i-- {
		pre.topo.shift(p.victims[i].w.placed, 1)
	}
	h.podSets = w.podSets
	claim := &placement{}
	if h.planned != nil {
		for _, s := range h.planned.shares {
			var amt []resAmt
			for _, r := range s.amt {
				a := r.amt
				for _, v := range p.victims {
					a -= v.w.placed.shareOf(s.node, r.res)
				}
				if a > 0 {
					amt = append(amt, resAmt{res: r.res, amt: a})
				}
			}
			if amt != nil {
				claim.shares = append(claim.shares, nodeShare{node: s.node, amt: amt})
			}
		}
		for pool, k := range h.planned.newNodes {
			for _, v := range p.victims {
				if v.w.placed != nil {
					k -= v.w.placed.newNodes[pool]
				}
			}
			if k > 0 {
				if claim.newNodes == nil {
					claim.newNodes = map[string]int32{}
				}
				claim.newNodes[pool] = k
			}
		}
	}
	pre.topo.reserve(claim, 1)
	h.held = []*placement{claim}
}

// shareOf is what placement p reserves of resource r on the named node.
func (p *placement) shareOf(node string, r int32) int64 {
	if p == nil {
		return 0
	}
	for _, s := range p.shares {
		if s.node == node {
			for _, x := range s.amt {
				if x.res == r {
					return x.amt
				}
			}
		}
	}
	return 0
}

// keepPlacement passes the placement of victim v, released while its
// preemptor waits for a domain, to the preemptor's hold: it stays reserved.
func (pre *preemption) keepPlacement(v *wl) bool {
	if v.placed == nil || !v.evicting {
		return false
	}
	p := pre.waitingPreemptor(v)
	if p == nil || p.hold == nil || !p.hold.check {
		return false
	}
	p.hold.held = append(p.hold.held, v.placed)
	return true
}

// releaseHold returns the capacity held for a preemptor (its target stays,
// for its placement).
func (pre *preemption) releaseHold(p *wl) {
	if p.hold == nil || len(p.hold.held) == 0 {
		return
	}
	for _, pl := range p.hold.held {
		pre.topo.reserve(pl, -1)
	}
	p.hold.held = nil
	pre.topo.freed = true
}

// dropHold forgets a preemptor's domain; capacity still held is returned
// at the end of the running cycle (within a cycle capacity only shrinks).
func (pre *preemption) dropHold(w *wl) {
	if w.hold == nil {
		return
	}
	pre.deferredHolds = append(pre.deferredHolds, w.hold.held...)
	w.hold = nil
}

// endCycle returns the holds dropped during the cycle.
func (pre *preemption) endCycle() {
	pre.wakeBehind()
	if len(pre.deferredHolds) == 0 {
		return
	}
	for _, pl := range pre.deferredHolds {
		pre.topo.reserve(pl, -1)
	}
	clear(pre.deferredHolds)
	pre.deferredHolds = pre.deferredHolds[:0]
	pre.topo.freed = true
}

// withoutOwnHold runs f with the quota and capacity held for w (a preemptor
// whose victims are all gone) released, as the next cycle will before it
// serves w, and puts them back: Explain then says what the cycle will do.
func (pre *preemption) withoutOwnHold(w *wl, f func()) {
	if len(w.victims) > 0 || (len(w.ghosts) == 0 && (w.hold == nil || len(w.hold.held) == 0)) {
		f()
		return
	}
	for _, g := range w.ghosts {
		pre.queues.cqs[g.cq].charge(g.usage, -1)
	}
	var held []*placement
	if w.hold != nil {
		held = w.hold.held
		for _, pl := range held {
			pre.topo.shift(pl, -1)
		}
		w.hold.held = nil
	}
	f()
	if w.hold != nil {
		w.hold.held = held
		for _, pl := range held {
			pre.topo.shift(pl, 1)
		}
	}
	for _, g := range w.ghosts {
		pre.queues.cqs[g.cq].charge(g.usage, 1)
	}
}

// waitForCapacity lists w among the workloads that capacity changes wake
// (wakes.go); flavor is the one it waits for, if any.
func (topo *topology) waitForCapacity(w *wl, flavor string) {
	w.waitFlavor = flavor
	if !w.topoWait {
		w.topoWait = true
		topo.topoWaiting = append(topo.topoWaiting, w)
	}
}

// where names a preemptor's domain for messages: "example.com/rack=r1 of
// flavor h200", or "flavor h200" when unpinned.
func (h *domainHold) where() string {
	if h.level < 0 {
		return "flavor " + h.flavor
	}
	return fmt.Sprintf("%s=%s of flavor %s", h.levelKey, h.key[h.level], h.flavor)
}

// msgWaitingOf is the status of a preemptor waiting for its victims.
func msgWaitingOf(w *wl) string {
	msg := msgWaiting(w.victims)
	if w.hold != nil && w.hold.check {
		msg += "; capacity in " + w.hold.where() + " is held for it"
	}
	return msg
}

// msgPreemptedFor is a victim's message, with the domain it frees.
func (nm *names) msgPreemptedFor(c *cqState, w *wl, v victim, target *domainHold) string {
	msg := nm.msgPreempted(c, w, v)
	if target != nil && target.check {
		msg += ", to free capacity in " + target.where()
	}
	return msg
}

// msgNoDomainFreed says, after the quota message, that victims could free
// the quota but no domain for the whole gang.
func (nm *names) msgNoDomainFreed(tf *topoFlavor, w *wl, flavor string, level int) string {
	where := "the capacity of flavor " + flavor
	if level >= 0 {
		where = fmt.Sprintf("any %s domain of flavor %s", tf.levels[level], flavor)
	}
	return fmt.Sprintf("; preemption could free the quota but not %s for all %d pods, so it preempts nothing", where, w.podCount())
}
