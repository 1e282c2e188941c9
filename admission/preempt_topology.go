package admission

import "slices"

// Preemption for gangs whose admission depends on capacity: a gang that asks
// for a topology domain, or whose flavor books capacity (provision.go). Freed
// quota alone says nothing about where capacity frees, so such a gang
// preempts only victims that free, besides the quota, ONE domain that then
// holds the whole gang: the domain's free capacity plus what the victims
// placed there (their reserved pods on its nodes, the new nodes they booked
// in its pools). The plan is a what-if on the live state, as for quota
// (preempt.go): victims are removed from the usage counters and from the
// capacity model, the gang is placed, everything is put back.
//
// Per domain, candidates are taken in order — victims of other cohort queues
// (which borrow) first, then lower priority, then the fewest of the gang's
// resources (GPUs for a GPU gang) — skipping those that free nothing the gang
// still lacks, until quota and domain both fit; then victims that turn out
// unnecessary are put back (a minimal set). The domain whose set evicts the
// least is chosen (ties: fewer victims, then the domain that sorts first).
// Domains are tried as placement tries them (placement.go): the requested
// level (Preferred: then coarser ones), on existing capacity first, then —
// for a flavor that books — with the nodes its pools can still create.
//
// No loop: the preemptor holds what its plan counts on until it is served
// (domainHold): the free capacity of the nodes its plan uses is claimed at
// once, and each victim's reserved capacity passes to the preemptor as the
// victim goes, together with its quota (ghosts). The preemptor is served
// first in the cycle after its last victim is gone, only then is its hold
// released, and it is admitted as planned (planned): with the flavors and in
// the domain it preempted for, which are exactly as its plan saw them. A plan
// is made only if that admission works on the what-if state (verify).

// domainHold is what a preemptor that needs capacity preempted for — the
// flavor per resource group and the domain its victims free — and the
// capacity held for it until it is served.
type domainHold struct {
	// flavors names the flavor of each resource group of the queue ("": not
	// requested).
	flavors []string
	// check: the plan frees a domain; else quota is all the gang needs on
	// these flavors (it is admitted anywhere, or booked unpinned).
	check  bool
	flavor string
	// level is the index of the domain's level in the flavor's levels (-1:
	// the whole flavor, unpinned); key its values, coarsest first.
	level int
	key   []string
	// levelKey is the level's label key ("" for the whole flavor).
	levelKey string
	// pools: the plan books the rest of the gang in the domain's pools.
	pools bool
	// planned is where the plan places the gang once its victims are gone,
	// for the pod sets it had then.
	planned *placement
	podSets []podSetSpec
	// held is capacity reserved for the preemptor: the free capacity its
	// plan claimed, then the placements of its victims as they go.
	held []*placement
}

// capPlan is a preemption plan: the victims, the flavor per resource group
// the gang is admitted with once they are gone, and what it is admitted into
// (nil: a plain quota plan). note says, when there is no plan, that
// victims could free the quota but no domain.
type capPlan struct {
	victims []victim
	flavors []int
	target  *domainHold
	note    string
	ok      bool
}

// stage is one way placement may take a gang: a level (-1: the whole
// flavor), with the pools' future nodes or not, and whether capacity is
// checked at all (a Preferred gang of a flavor that never books is admitted
// anywhere; an unpinned gang of a flavor without pools is booked where the
// autoscaler chooses).
type stage struct {
	level        int
	pools, check bool
}

// capCand is a candidate victim and its size: how much of the gang's
// request it holds.
type capCand struct {
	victim
	size uint64
}

// maxFlavorChoices bounds the flavor assignments a capacity plan tries.
const maxFlavorChoices = 16

// plan finds the victims whose eviction lets w in, with the policy of its
// queue. A gang whose admission cannot depend on capacity — no topology
// request, no flavor that books among those of its resource groups — gets the
// quota plan (planPreemption); the others a capacity plan, with the flavors
// it is admitted with once its victims are gone: choosing them again then
// could pick a flavor that books and has no room (found by the preemptor
// check of FuzzConvergence).
func (pre *preemption) plan(c *cqState, w *wl) capPlan {
	if c.spec == nil || !pre.canPreempt(c) {
		return capPlan{}
	}
	clear(pre.leaving)
	if w.topo == nil && !pre.mayBook(c, w) {
		vs, flavors, ok := pre.planPreemption(c, w)
		return capPlan{victims: vs, flavors: flavors, ok: ok}
	}
	return pre.planCapacity(c, w)
}

// mayBook reports whether a flavor of a resource group w requests books
// capacity.
func (pre *preemption) mayBook(c *cqState, w *wl) bool {
	for gi := range c.groups {
		if !requestsGroup(c, w, gi) {
			continue
		}
		for _, f := range c.groups[gi].flavors {
			if tf, ok := pre.topo.flavorTopo[f.name]; ok && tf.policy.books() {
				return true
			}
		}
	}
	return false
}

// planCapacity tries the flavor assignments in order and, for each, the
// stages of placement, first avoiding the domains whose bookings failed for
// w (then not). In the first stage where some domain can be freed, plans are
// taken cheapest first, and the first whose admission works once its victims
// are gone (verify) is the plan.
func (pre *preemption) planCapacity(c *cqState, w *wl) capPlan {
	choices := flavorChoices(c, w)
	for _, flavors := range choices {
		var name string
		var tf *topoFlavor
		li := -1
		if w.topo != nil {
			if name, tf, li = pre.topo.topologyFlavor(c, flavors, w.topo.Level); tf == nil {
				continue // UnknownTopologyLevel with these flavors
			}
		} else {
			name, tf = pre.topo.provisioningFlavor(c, flavors)
		}
		stages := []stage{{level: -1}}
		if tf != nil {
			stages = stagesFor(tf, w, li)
		}
		cands := pre.capCandidates(c, w, flavors)
		avoids := [][]TopologyAssignment{w.avoid}
		if len(w.avoid) > 0 {
			avoids = append(avoids, nil)
		}
		for _, avoid := range avoids {
			for _, st := range stages {
				for _, p := range pre.planStage(c, w, flavors, name, tf, st, avoid, cands) {
					if pre.verify(c, w, p) {
						return p
					}
				}
			}
		}
	}
	return capPlan{note: pre.noDomainNote(c, w, choices)}
}

// noDomainNote says, for a gang no plan lets in, whether victims could free
// its quota — then it is no domain they could free — or "".
func (pre *preemption) noDomainNote(c *cqState, w *wl, choices [][]int) string {
	for _, flavors := range choices {
		name, tf := pre.topo.capacityFlavorOf(c, w, flavors)
		if tf == nil {
			continue
		}
		if _, _, ok := pre.freeFor(c, w, flavors, nil, "", nil, false, pre.capCandidates(c, w, flavors)); ok {
			li := -1
			if w.topo != nil {
				li = slices.Index(tf.levels, w.topo.Level)
			}
			return pre.names.msgNoDomainFreed(tf, w, name, li)
		}
	}
	return ""
}

// verify reports whether w, once p's victims are gone, is admitted as
// planned (planned): the next cycle admits it so.
func (pre *preemption) verify(c *cqState, w *wl, p capPlan) bool {
	for _, v := range p.victims {
		pre.putBack(v.w, -1)
	}
	saved := w.hold
	w.hold = p.target
	_, ok := pre.planned(c, w)
	w.hold = saved
	for i := len(p.victims) - 1; i >= 0; i-- {
		pre.putBack(p.victims[i].w, 1)
	}
	return ok
}

// planned is the admission of a preemptor that needs capacity, served once
// its victims are gone and its hold released: with the flavors it preempted
// for and in the domain it freed (placed anywhere, or booked unpinned, when
// its plan needed no domain). False when that no longer works — the queue,
// the gang or the capacity changed — and it is then evaluated as any
// workload. Choosing its flavors again could take another flavor that quota
// now allows (released by another preemptor served before it, say) but that
// cannot take the gang — one without its topology level — and the victims
// would come back for nothing.
func (pre *preemption) planned(c *cqState, w *wl) (outcome, bool) {
	h := w.hold
	if h == nil || len(h.held) > 0 || len(w.victims) > 0 || len(h.flavors) != len(c.groups) {
		return outcome{}, false
	}
	out := outcome{flavors: make([]int, len(c.groups))}
	for gi, name := range h.flavors {
		out.flavors[gi] = -1
		if name == "" {
			if requestsGroup(c, w, gi) {
				return outcome{}, false
			}
			continue
		}
		out.flavors[gi] = slices.IndexFunc(c.groups[gi].flavors, func(f flavorState) bool { return f.name == name })
		if out.flavors[gi] < 0 || !requestsGroup(c, w, gi) {
			return outcome{}, false
		}
	}
	if !quotaFits(c, w, out.flavors) {
		return outcome{}, false
	}
	if !h.check {
		out.place, out.reason, out.msg, out.flavor = pre.topo.placeIn(c, w, out.flavors)
		return out, out.reason == ""
	}
	tf, ok := pre.topo.flavorTopo[h.flavor]
	if !ok {
		return outcome{}, false
	}
	name, tfChosen := pre.topo.capacityFlavorOf(c, w, out.flavors)
	if tfChosen != tf || name != h.flavor {
		return outcome{}, false
	}
	if out.place = pre.topo.preemptedFor(tf, h.flavor, w); out.place == nil {
		return outcome{}, false
	}
	out.flavor = h.flavor
	return out, true
}

// capacityFlavorOf is the flavor, among those chosen per resource group,
// whose capacity w's admission depends on: the one with w's topology level,
// else one that books.
func (topo *topology) capacityFlavorOf(c *cqState, w *wl, flavors []int) (string, *topoFlavor) {
	if w.topo != nil {
		name, tf, _ := topo.topologyFlavor(c, flavors, w.topo.Level)
		return name, tf
	}
	return topo.provisioningFlavor(c, flavors)
}

// flavorChoices lists flavor assignments (a flavor index per resource group,
// -1 for a group w does not request) in order: per group, the flavors w's
// quota fits as flavor choice orders them, then the others in the group's
// order that w could ever fit; assignments in lexicographic order of the
// groups, at most maxFlavorChoices.
func flavorChoices(c *cqState, w *wl) [][]int {
	opts := make([][]int, len(c.groups))
	for gi := range c.groups {
		if !requestsGroup(c, w, gi) {
			opts[gi] = []int{-1}
			continue
		}
		fis := fallbackOrder(c, w, gi)
		for fi, f := range c.groups[gi].flavors {
			if !slices.Contains(fis, fi) && withinMax(c, w, gi, f.id) {
				fis = append(fis, fi)
			}
		}
		if len(fis) == 0 {
			return nil
		}
		opts[gi] = fis
	}
	var out [][]int
	cur := make([]int, len(c.groups))
	var walk func(gi int)
	walk = func(gi int) {
		if len(out) >= maxFlavorChoices {
			return
		}
		if gi == len(c.groups) {
			out = append(out, slices.Clone(cur))
			return
		}
		for _, fi := range opts[gi] {
			cur[gi] = fi
			walk(gi + 1)
		}
	}
	walk(0)
	return out
}

// flavorNames names the flavor of each resource group ("" for -1).
func flavorNames(c *cqState, flavors []int) []string {
	out := make([]string, len(flavors))
	for gi, fi := range flavors {
		if fi >= 0 {
			out[gi] = c.groups[gi].flavors[fi].name
		}
	}
	return out
}

// withinMax reports whether w's requests in group gi could ever fit flavor f.
func withinMax(c *cqState, w *wl, gi int, f int32) bool {
	if !c.opens(w, gi, f) {
		return false
	}
	for _, r := range w.req {
		if c.resGroup[r.res] == gi && r.amt > c.maxAvailable(makeFR(f, r.res)) {
			return false
		}
	}
	return true
}

// stagesFor lists, in placement's order (placeAvoiding), the ways flavor tf
// may take w: each level on existing capacity, then, for a flavor that
// books, each level with its pools.
func stagesFor(tf *topoFlavor, w *wl, li int) []stage {
	var levels []int
	switch {
	case w.topo == nil:
		levels = []int{-1}
	case w.topo.Mode == TopologyRequired:
		levels = []int{li}
	default:
		for l := li; l >= -1; l-- {
			levels = append(levels, l)
		}
	}
	books := tf.policy.books()
	var out []stage
	for _, l := range levels {
		// A Preferred gang of a flavor that never books goes anywhere once
		// no domain holds it: quota is all it needs.
		out = append(out, stage{level: l, check: l >= 0 || books})
	}
	if !books {
		return out
	}
	if len(tf.pools) == 0 {
		if w.topo == nil || w.topo.Mode != TopologyRequired {
			out = append(out, stage{level: -1}) // booked unpinned: the autoscaler chooses
		}
		return out
	}
	for _, l := range levels {
		out = append(out, stage{level: l, pools: true, check: true})
	}
	return out
}

// planStage lists, for one stage, a plan per domain that victims can free,
// the one that evicts the least first (then fewer victims, then the domain
// that sorts first).
func (pre *preemption) planStage(c *cqState, w *wl, flavors []int, name string, tf *topoFlavor, st stage,
	avoid []TopologyAssignment, cands []capCand) []capPlan {
	if !st.check {
		vs, _, ok := pre.freeFor(c, w, flavors, nil, "", nil, false, cands)
		if !ok {
			return nil
		}
		h := &domainHold{flavors: flavorNames(c, flavors), flavor: name, level: -1}
		return []capPlan{{victims: vs, flavors: slices.Clone(flavors), target: h, ok: true}}
	}
	var plans []capPlan
	var costs []uint64
	var freeable map[string]vec
	if !st.pools && st.level >= 0 {
		freeable = pre.freeable(tf, name, st.level, cands)
	}
	for _, key := range domainsOf(tf, st.level, st.pools) {
		if avoided(avoid, name, key) || (freeable != nil && !mayFree(tf, w, key, freeable)) {
			continue
		}
		vs, cost, ok := pre.freeFor(c, w, flavors, tf, name, key, st.pools, cands)
		if !ok {
			continue
		}
		h := &domainHold{flavors: flavorNames(c, flavors), check: true, flavor: name, level: st.level, key: slices.Clone(key), pools: st.pools}
		if st.level >= 0 {
			h.levelKey = tf.levels[st.level]
		}
		// Insert in order of cost, then victims; a later domain after an
		// equal one.
		i := 0
		for i < len(plans) && (costs[i] < cost || (costs[i] == cost && len(plans[i].victims) <= len(vs))) {
			i++
		}
		plans = slices.Insert(plans, i, capPlan{victims: vs, flavors: slices.Clone(flavors), target: h, ok: true})
		costs = slices.Insert(costs, i, cost)
	}
	return plans
}
