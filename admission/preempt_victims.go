package admission

import (
	"math"
	"math/bits"
	"slices"
	"strings"
)

// The victims of a gang that needs capacity (preempt_topology.go): which
// candidates free what it lacks, in which order, and the minimal set that
// frees its quota and one domain.

// freeable sums, per domain of level l of flavor tf (by its key's values
// joined), the capacity the candidates reserved on its nodes.
func (pre *preemption) freeable(tf *topoFlavor, name string, l int, cands []capCand) map[string]vec {
	out := map[string]vec{}
	for _, cd := range cands {
		p := cd.w.placed
		if p == nil {
			continue
		}
		for _, s := range p.shares {
			n, ok := pre.topo.nodes[s.node]
			if !ok || !slices.Contains(n.flavors, name) {
				continue
			}
			key, ok := domainKey(tf, n.labels, l)
			if !ok {
				continue
			}
			k := strings.Join(key, "\x00")
			v := out[k]
			for _, r := range s.amt {
				v.add(r.res, r.amt)
			}
			out[k] = v
		}
	}
	return out
}

// mayFree reports whether the domain key could hold w once every candidate
// is gone: what its nodes have left plus what the candidates reserved there
// (freeable) covers the gang's request. A bound: a domain it rejects cannot
// be freed, one it accepts may not be.
func mayFree(tf *topoFlavor, w *wl, key []string, freeable map[string]vec) bool {
	left := slices.Clone(tf.leftIn(key))
	left.addAll(freeable[strings.Join(key, "\x00")], 1)
	return left.covers(w.req)
}

// freeFor evicts candidates, in order, that free something w still lacks —
// quota of its flavors, or capacity in the domain key of flavor tf (nil: no
// capacity needed) — until w fits both, then puts back those not needed. It
// returns the victims and their total size. Every counter is as before on
// return.
func (pre *preemption) freeFor(c *cqState, w *wl, flavors []int, tf *topoFlavor, name string, key []string, pools bool,
	cands []capCand) ([]victim, uint64, bool) {
	fits := func() (bool, bool) {
		quota := quotaFits(c, w, flavors)
		return quota, tf == nil || pre.topo.fitIn(tf, w, key, pools) != nil
	}
	quotaOK, domOK := fits()
	if quotaOK && domOK {
		return nil, 0, false // fits without victims: nothing to preempt for
	}
	var removed []capCand
	defer func() {
		for i := len(removed) - 1; i >= 0; i-- {
			pre.putBack(removed[i].w, 1)
		}
	}()
	var gone []victim
	for _, cd := range cands {
		if !pre.helps(c, w, flavors, tf, name, key, pools, cd.w, quotaOK, domOK) || !pre.ruleHoldsFor(c, w, flavors, &cd.victim, true) {
			continue
		}
		gone = gone[:0]
		for _, x := range removed {
			gone = append(gone, x.victim)
		}
		if !pre.freesFully(c, cd.victim, gone) {
			continue
		}
		pre.putBack(cd.w, -1)
		removed = append(removed, cd)
		if quotaOK, domOK = fits(); quotaOK && domOK {
			removed = pre.minimizeFor(c, w, flavors, removed, fits)
			vs := make([]victim, len(removed))
			var cost uint64
			for i, x := range removed {
				vs[i] = x.victim
				cost = satAddU(cost, x.size)
			}
			return vs, cost, true
		}
	}
	return nil, 0, false
}

// minimizeFor puts back victims (latest first) that w does not need, as long
// as every remaining victim's rule still holds.
func (pre *preemption) minimizeFor(c *cqState, w *wl, flavors []int, removed []capCand, fits func() (bool, bool)) []capCand {
	for i := len(removed) - 1; i >= 0; i-- {
		pre.putBack(removed[i].w, 1)
		keep := false
		if quota, dom := fits(); !quota || !dom {
			keep = true
		} else {
			for j := range removed {
				if j != i && !pre.ruleHoldsFor(c, w, flavors, &removed[j].victim, false) {
					keep = true
					break
				}
			}
		}
		if keep {
			pre.putBack(removed[i].w, -1)
			continue
		}
		removed = slices.Delete(removed, i, i+1)
	}
	return removed
}

// putBack charges v's usage and reserves its placement (sign 1), or removes
// them (-1): a what-if that leaves nothing else changed.
func (pre *preemption) putBack(v *wl, sign int64) {
	pre.queues.cqs[v.admCQ].charge(v.usage, sign)
	pre.topo.shift(v.placed, sign)
}

// quotaFits reports whether w's requests fit the flavors chosen for every
// resource group it requests.
func quotaFits(c *cqState, w *wl, flavors []int) bool {
	for gi, fi := range flavors {
		if fi < 0 {
			continue
		}
		if fits, _ := c.fitsFlavor(w, gi, c.groups[gi].flavors[fi].id); !fits {
			return false
		}
	}
	return true
}

// helps reports whether evicting v frees something w still lacks: quota of a
// (flavor, resource) w's request exceeds what is available, or capacity in
// the domain while it does not hold w.
func (pre *preemption) helps(c *cqState, w *wl, flavors []int, tf *topoFlavor, name string, key []string, pools bool,
	v *wl, quotaOK, domOK bool) bool {
	if !quotaOK {
		for _, r := range w.req {
			gi := c.resGroup[r.res]
			k := makeFR(c.groups[gi].flavors[flavors[gi]].id, r.res)
			if r.amt > c.available(k) && usageOf(v, k) > 0 {
				return true
			}
		}
	}
	if tf == nil || domOK || v.placed == nil {
		return false
	}
	for _, s := range v.placed.shares {
		if pre.topo.nodeIn(tf, name, s.node, key) && slices.ContainsFunc(s.amt, func(x resAmt) bool { return w.reqAmt(x.res) > 0 }) {
			return true
		}
	}
	if pools {
		for pl := range v.placed.newNodes {
			if p, ok := pre.topo.pools[pl]; ok && p.flavor == name && inDomain(tf, p.labels, key) {
				return true
			}
		}
	}
	return false
}

// nodeIn reports whether the named node is a node of flavor name in the
// domain key of tf.
func (topo *topology) nodeIn(tf *topoFlavor, name, node string, key []string) bool {
	n, ok := topo.nodes[node]
	return ok && slices.Contains(n.flavors, name) && inDomain(tf, n.labels, key)
}

// ruleHoldsFor checks, on the current what-if state, the rule under which v
// may be preempted: any victim of w's own queue (its priority was checked),
// else the cohort rules (ruleHolds) on a resource group whose flavor v uses.
func (pre *preemption) ruleHoldsFor(c *cqState, w *wl, flavors []int, v *victim, before bool) bool {
	if v.cq == c {
		v.reason = InClusterQueue
		return true
	}
	for gi, fi := range flavors {
		if fi < 0 {
			continue
		}
		f := c.groups[gi].flavors[fi].id
		if usesGroupFlavor(c, v.w, w, gi, f) && pre.ruleHolds(c, w, gi, f, v, before) {
			return true
		}
	}
	return false
}

// freesFully reports whether evicting v frees, for the preemptor of queue c,
// all of its usage whatever the order in which the workloads already leaving
// v's queue go: v is of c's own queue, or its queue keeps at least its
// guaranteed quota (nominal minus lending limit) of everything v uses once
// they and v are gone. Otherwise a part of v's usage returns to its queue's
// guaranteed quota rather than to the cohort, by how much depends on which
// goes first: two preemptors that each counted on all of their victims'
// usage could not both be admitted, and one would preempt again for nothing
// (found by the preemptor check of FuzzConvergence). removed are the plan's
// victims so far (their usage is already taken off their queues).
func (pre *preemption) freesFully(c *cqState, v victim, removed []victim) bool {
	d := v.cq
	if d == c || !slices.ContainsFunc(v.w.usage, func(u frAmt) bool { return d.quota[u.fr].guaranteed > 0 }) {
		return true
	}
	// leaving: the queue's usage that goes whatever this plan does — held
	// quota (ghosts) and workloads being evicted —, the same throughout a
	// plan (it takes off only workloads that stay): kept for the plan.
	leaving, ok := pre.leaving[d]
	if !ok {
		leaving = map[frKey]int64{}
		for k, u := range d.usage {
			leaving[k] = u
		}
		for _, x := range removed {
			if x.cq == d {
				for _, u := range x.w.usage {
					leaving[u.fr] += u.amt
				}
			}
		}
		d.admitted.ascend(func(x *wl) bool {
			if !leavesQueue(x) {
				for _, u := range x.usage {
					leaving[u.fr] -= u.amt
				}
			}
			return true
		})
		if pre.leaving == nil {
			pre.leaving = map[*cqState]map[frKey]int64{}
		}
		pre.leaving[d] = leaving
	}
	for _, u := range v.w.usage {
		g := d.quota[u.fr].guaranteed
		if gone := leaving[u.fr]; gone > 0 && g > 0 && d.usage[u.fr]-gone-u.amt < g {
			return false
		}
	}
	return true
}

// leavesQueue reports whether an admitted workload is on its way out: being
// evicted, or its failed booking being written.
func leavesQueue(x *wl) bool {
	return x.evicting || x.evictedAs != "" || x.deciding == BookingRetry || x.deciding == BookingEvict
}

// capCandidates lists admitted (confirmed, not being evicted) workloads whose
// priority the policy allows and that use a flavor of the assignment for a
// resource w requests, or hold capacity in the capacity model, in victim
// order: other cohort queues first, then lower priority, then the smallest,
// then as lessVictim.
func (pre *preemption) capCandidates(c *cqState, w *wl, flavors []int) []capCand {
	relevant := func(v *wl) bool {
		if v.placed != nil && (len(v.placed.shares) > 0 || len(v.placed.newNodes) > 0) {
			return true
		}
		for gi, fi := range flavors {
			if fi >= 0 && usesGroupFlavor(c, v, w, gi, c.groups[gi].flavors[fi].id) {
				return true
			}
		}
		return false
	}
	var out []capCand
	p := c.spec.Preemption
	if isOn(p.WithinClusterQueue) {
		c.admitted.ascend(func(v *wl) bool {
			if !priorityAllows(p.WithinClusterQueue, w, v) {
				return v.prio <= w.prio
			}
			if eligible(v) && relevant(v) {
				out = append(out, capCand{victim: victim{w: v, cq: c, reason: InClusterQueue}})
			}
			return true
		})
	}
	reclaim, fair := p.ReclaimWithinCohort, PreemptionMode("")
	if pre.opts.FairSharing {
		fair = fairMode(c)
	}
	if c.cohort != nil && (isOn(reclaim) || isOn(fair)) {
		for _, d := range c.cohort.members {
			if d == c {
				continue
			}
			d.admitted.ascend(func(v *wl) bool {
				if (priorityAllows(reclaim, w, v) || priorityAllows(fair, w, v)) && eligible(v) && relevant(v) {
					out = append(out, capCand{victim: victim{w: v, cq: d}})
				}
				return true
			})
		}
	}
	for i := range out {
		out[i].size = victimSize(w, out[i].w)
	}
	slices.SortFunc(out, func(a, b capCand) int {
		if (a.cq == c) != (b.cq == c) {
			if a.cq == c {
				return 1
			}
			return -1
		}
		switch {
		case a.w.prio != b.w.prio:
			return int(a.w.prio) - int(b.w.prio)
		case a.size != b.size:
			if a.size < b.size {
				return -1
			}
			return 1
		case lessVictim(a.w, b.w):
			return -1
		case lessVictim(b.w, a.w):
			return 1
		}
		return 0
	})
	return out
}

// victimSize is how much of w's request v holds: the sum, over the
// resources w requests, of v's usage of the resource (any flavor) in units
// of w's request of it (fixed point, 2^20 = all of it). For a gang that
// requests GPUs only, it orders victims by their GPUs.
func victimSize(w, v *wl) uint64 {
	var size uint64
	for _, r := range w.req {
		var used int64
		for _, u := range v.usage {
			if u.fr.res() == r.res {
				used += u.amt
			}
		}
		if used <= 0 || r.amt <= 0 {
			continue
		}
		hi, lo := bits.Mul64(uint64(used), 1<<20)
		if hi >= uint64(r.amt) {
			return math.MaxUint64
		}
		q, _ := bits.Div64(hi, lo, uint64(r.amt))
		size = satAddU(size, q)
	}
	return size
}

func satAddU(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
