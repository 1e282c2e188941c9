package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// topologyFlavor returns the flavor, among those chosen for w's resource groups,
// whose levels include level, with the level's index.
func (topo *topology) topologyFlavor(c *cqState, flavors []int, level string) (string, *topoFlavor, int) {
	for gi, fi := range flavors {
		if fi < 0 {
			continue
		}
		name := c.groups[gi].flavors[fi].name
		if tf, ok := topo.flavorTopo[name]; ok {
			if li := slices.Index(tf.levels, level); li >= 0 {
				return name, tf, li
			}
		}
	}
	return "", nil, -1
}

// placeIn plans w's pods (see TopologyMode, and provision.go for flavors that
// book capacity). It returns the plan — nil when w needs none — or the reason it
// cannot be placed and a message, and the flavor it placed in, or tried to.
// Domains whose bookings failed for w are avoided while another domain can
// take the gang; when none can, they are tried again rather than waited out.
func (topo *topology) placeIn(c *cqState, w *wl, flavors []int) (*placement, PendingReason, string, string) {
	p, reason, msg, flavor := topo.placeAvoiding(c, w, flavors, w.avoid)
	if reason == TopologyUnavailable && len(w.avoid) > 0 {
		return topo.placeAvoiding(c, w, flavors, nil)
	}
	return p, reason, msg, flavor
}

// placeAvoiding is placeIn that skips the domains in avoid.
func (topo *topology) placeAvoiding(c *cqState, w *wl, flavors []int, avoid []TopologyAssignment) (*placement, PendingReason, string, string) {
	var name string
	var tf *topoFlavor
	li := -1
	if w.topo != nil {
		name, tf, li = topo.topologyFlavor(c, flavors, w.topo.Level)
		if tf == nil {
			return nil, UnknownTopologyLevel, topo.msgUnknownLevel(c, flavors, w.topo.Level), name
		}
	} else if name, tf = topo.provisioningFlavor(c, flavors); tf == nil {
		return nil, "", "", name
	}
	// Levels to try, finest first; -1 is the whole flavor, unpinned.
	levels := []int{-1}
	switch {
	case w.topo == nil:
	case w.topo.Mode == TopologyRequired:
		levels = []int{li}
	default:
		levels = levels[:0]
		for l := li; l >= -1; l-- {
			levels = append(levels, l)
		}
	}
	for _, l := range levels {
		p := topo.search(tf, name, w, l, false, avoid)
		if p == nil {
			continue
		}
		if l < 0 {
			// Unpinned: the pods may land anywhere, so the engine reserves nothing
			// on nodes (the pods are counted once they are bound).
			p.shares = nil
		}
		if tf.policy.Mode == ProvisionAlways {
			p.provision, p.flavor = true, name
		} else if l < 0 {
			// Fits somewhere on existing capacity without pinning: nothing to book
			// or reserve (the pods are counted once they are bound).
			return &placement{}, "", "", name
		}
		p.assign.Flavor = name
		return p, "", "", name
	}
	if !tf.policy.books() {
		if w.topo != nil && w.topo.Mode == TopologyPreferred {
			return &placement{}, "", "", name // anywhere: no pinning, no reservation
		}
		return topo.noDomain(tf, w, name, li, levels, false)
	}
	if len(tf.pools) == 0 {
		if w.topo != nil && w.topo.Mode == TopologyRequired {
			return topo.noDomain(tf, w, name, li, levels, false)
		}
		// Without CapacityPools berth cannot tell where capacity can be
		// created: an unpinned request lets the autoscaler choose, and so
		// does its scale-up for the pending pod of a single-pod job.
		if tf.policy.leftToAutoscaler(w) {
			return &placement{}, "", "", name
		}
		return &placement{provision: true, scaleUp: true, flavor: name}, "", "", name
	}
	for _, l := range levels {
		var p *placement
		if isHostLevel(tf, l) {
			p = topo.searchNewNode(tf, name, w, l, avoid) // one node, never two (provision_host.go)
		} else {
			p = topo.search(tf, name, w, l, true, avoid)
		}
		if p != nil {
			if tf.policy.leftToAutoscaler(w) {
				// A pool can create a node for the pod: the autoscaler's
				// scale-up for pending pods will (singlepod.go).
				return &placement{}, "", "", name
			}
			if l < 0 {
				p.shares = nil
			}
			p.provision, p.scaleUp, p.flavor = true, len(p.newNodes) > 0, name
			p.assign.Flavor = name
			return p, "", "", name
		}
	}
	return topo.noDomain(tf, w, name, li, levels, true)
}

// noDomain is the outcome of a gang no domain can take now: ExceedsDomainCapacity
// when none ever could as the cluster is built — every node empty, every pool at
// its maximum — so someone must change the gang or the cluster; otherwise
// TopologyUnavailable, to wait for capacity.
func (topo *topology) noDomain(tf *topoFlavor, w *wl, flavor string, li int, levels []int, withPools bool) (*placement, PendingReason, string, string) {
	suffix := ""
	switch {
	case withPools:
		suffix = ", even with the nodes its CapacityPools can still create"
	case tf.policy.books():
		suffix = "; the flavor has no CapacityPool, so berth cannot ask for capacity in one domain"
	}
	// Taints the gang does not tolerate are said in either message: they may
	// be why no domain can take it.
	tl := levels[0]
	if withPools && isHostLevel(tf, tl) {
		tl-- // a pool's new nodes are in no hostname domain yet: say it of their coarser domain
	}
	taints := w.taintNote(tf, tl, withPools)
	if withPools && isHostLevel(tf, li) {
		suffix += topo.names.msgNewNodes(tf, w, li)
	}
	domains := 0
	for _, l := range levels {
		for _, key := range domainsOf(tf, l, withPools) {
			domains++
			if topo.fitsEver(tf, w, key, withPools) {
				return nil, TopologyUnavailable, topo.names.msgNoDomain(tf, w, flavor, li, suffix) + taints, flavor
			}
		}
		if withPools && isHostLevel(tf, l) {
			// Every node a pool can create is a hostname domain of its own.
			n, ever := newNodesEver(tf, w, l)
			domains += n
			if ever {
				return nil, TopologyUnavailable, topo.names.msgNoDomain(tf, w, flavor, li, suffix) + taints, flavor
			}
		}
	}
	if domains == 0 {
		// No node or pool in any domain yet: they may come.
		return nil, TopologyUnavailable, topo.names.msgNoDomain(tf, w, flavor, li, suffix) + taints, flavor
	}
	return nil, ExceedsDomainCapacity, topo.names.msgNeverFits(tf, w, flavor, li, withPools) + taints, flavor
}

// fitsEver reports whether the gang would fit the domain with all its nodes empty
// and its pools grown to their maximum.
func (topo *topology) fitsEver(tf *topoFlavor, w *wl, key []string, withPools bool) bool {
	for _, n := range tf.nodesIn(key) {
		if n.alloc == nil && w.admitsAny(tf, n) {
			return true // its capacity is unknown: it might
		}
	}
	pk := topo.packNodes(tf, w, key, w.req[0].res, true, false)
	if pk.remaining == nil {
		return true
	}
	if !withPools {
		return false
	}
	_, _, ok := packPools(tf, w, key, pk.remaining, true)
	return ok
}

// search tries every domain of level l (-1: all the flavor's capacity as one,
// unpinned) and returns the best placement: one on existing free capacity if any
// domain has it, else, withPools, the one needing the fewest new nodes. Among
// those, the pods' preferred node affinity ranks first, then the tightest
// domain, leaving the least of the gang's largest resource free, so large free
// domains stay whole. Ties go to the domain that sorts first. Domains the
// workload's bookings failed in are skipped.
func (topo *topology) search(tf *topoFlavor, flavor string, w *wl, l int, withPools bool, avoid []TopologyAssignment) *placement {
	var best *placement
	var bestNew int32
	var bestLeft, bestScore int64
	dom := w.dominant()
	domains := domainsOf(tf, l, withPools)
	for _, key := range domains {
		if avoided(avoid, flavor, key) {
			continue
		}
		if len(key) > 0 && !mayHold(tf, w, key, withPools) {
			continue // the domain has less left than the gang asks for
		}
		// Only domains compete on what they leave free.
		pk := topo.packNodes(tf, w, key, dom, false, len(domains) > 1)
		var newNodes map[string]int32
		var total int32
		if pk.remaining != nil {
			if !withPools {
				continue
			}
			var ok bool
			if newNodes, total, ok = packPools(tf, w, key, pk.remaining, false); !ok {
				continue
			}
			pk.score += topo.poolScore(w, newNodes, pk.remaining)
		}
		better := best == nil || total < bestNew ||
			(total == bestNew && (pk.score > bestScore || (pk.score == bestScore && pk.left < bestLeft)))
		if better {
			best = &placement{shares: pk.shares, newNodes: newNodes}
			if l >= 0 {
				// The key is the domain index's own: the assignment gets a copy.
				best.assign = TopologyAssignment{Level: tf.levels[l], Levels: tf.levels[:l+1], Domain: slices.Clone(key)}
			}
			bestNew, bestLeft, bestScore = total, pk.left, pk.score
		}
	}
	return best
}

// mayHold reports whether the domain key could hold w at all: what its
// nodes have left — withPools, with the room of one of its pools, as a
// scale-up grows one node group — covers every resource the gang asks for.
// It is a bound, not a packing: a domain it rejects cannot hold the gang,
// one it accepts may not.
func mayHold(tf *topoFlavor, w *wl, key []string, withPools bool) bool {
	left := tf.leftIn(key)
	if left.covers(w.req) {
		return true
	}
	if !withPools {
		return false
	}
	for _, p := range tf.pools {
		if inDomain(tf, p.labels, key) && poolCovers(p, left, w.req) {
			return true
		}
	}
	return false
}

// poolCovers reports whether left and the nodes pool p can still create
// hold req together.
func poolCovers(p *topoPool, left vec, req []resAmt) bool {
	room := int64(max(0, p.avail-p.reserved))
	for _, r := range req {
		need := r.amt - left.at(r.res)
		if need <= 0 {
			continue
		}
		perNode := p.node.at(r.res)
		if perNode == 0 || (need+perNode-1)/perNode > room {
			return false
		}
	}
	return true
}

// poolScore is the pods' preference for the new nodes planned for the
// remaining pods.
func (topo *topology) poolScore(w *wl, newNodes map[string]int32, remaining []int32) int64 {
	var s int64
	for name := range newNodes {
		p := topo.pools[name]
		for i := range w.podSets {
			s += int64(remaining[i]) * w.podSets[i].score(p.labels)
		}
	}
	return s
}

// avoided reports whether the domain key of flavor is among the failed domains.
func avoided(avoid []TopologyAssignment, flavor string, key []string) bool {
	return slices.ContainsFunc(avoid, func(a TopologyAssignment) bool {
		return a.Flavor == flavor && slices.Equal(a.Domain, key)
	})
}

// dominant is the gang's dominant resource: its largest total request.
func (w *wl) dominant() int32 {
	dom := w.req[0].res
	for _, r := range w.req {
		if r.amt > w.reqAmt(dom) {
			dom = r.res
		}
	}
	return dom
}

// reqAmt returns w's total request of resource r.
func (w *wl) reqAmt(r int32) int64 {
	for _, x := range w.req {
		if x.res == r {
			return x.amt
		}
	}
	return 0
}

// packing is the outcome of packing a gang's pods on a domain's nodes.
type packing struct {
	shares []nodeShare
	// remaining pods per pod set that found no node; nil: all placed.
	remaining []int32
	// left is what is left of the gang's dominant resource on the domain's
	// nodes its pods may use, afterwards.
	left int64
	// score is the sum of the pods' preferences for the nodes they got.
	score int64
}

// packNodes places w's pods on the domain's nodes, pod set by pod set, filling
// each node (in name order) before the next, on the nodes each pod set's own
// constraints admit and keeping apart the pod sets that must be. With ever,
// every node counts as empty (its allocatable, nothing reserved). Without
// measure, it stops at the node that takes the last pod, and the packing's
// left and score count only the nodes visited: enough to say whether and
// where the gang fits, which is all a lone domain is asked.
func (topo *topology) packNodes(tf *topoFlavor, w *wl, key []string, dom int32, ever, measure bool) packing {
	var out packing
	var extra vec // what the gang takes of the node being packed
	remaining := make([]int32, len(w.podSets))
	for i, ps := range w.podSets {
		remaining[i] = ps.count
	}
	onNode := make([]int32, len(w.podSets))
	for _, n := range tf.nodesIn(key) {
		if !w.admitsAny(tf, n) {
			continue
		}
		free, reserved := n.free, n.reserved
		if ever {
			free, reserved = n.alloc, nil
		}
		extra = extra[:0]
		clear(onNode)
		for i := range w.podSets {
			ps := &w.podSets[i]
			if !ps.admitsNode(tf, n) {
				continue
			}
			k := w.apartRoom(i, onNode, podsThatFit(free, reserved, ps.req, extra, remaining[i]))
			if k == 0 {
				continue
			}
			for _, r := range ps.req {
				extra.add(r.res, r.amt*int64(k))
			}
			remaining[i] -= k
			onNode[i] += k
			out.score += int64(k) * ps.score(n.labels)
		}
		out.left += max(0, free.at(dom)-reserved.at(dom)-extra.at(dom))
		// Nodes are visited in name order: the shares come out sorted.
		if share := shareOf(n.name, extra); share.amt != nil {
			out.shares = append(out.shares, share)
		}
		if !measure && !slices.ContainsFunc(remaining, func(r int32) bool { return r > 0 }) {
			break
		}
	}
	if slices.ContainsFunc(remaining, func(r int32) bool { return r > 0 }) {
		out.remaining = remaining
	}
	return out
}

// shareOf is the share of node of the amounts planned there; its amt is
// nil when they are none (pods that request nothing reserve nothing).
func shareOf(node string, planned vec) nodeShare {
	s := nodeShare{node: node}
	for r, a := range planned {
		if a != 0 {
			s.amt = append(s.amt, resAmt{res: int32(r), amt: a})
		}
	}
	return s
}

// sharesOf turns planned amounts per node into sorted shares.
func sharesOf(planned map[string]vec) []nodeShare {
	shares := make([]nodeShare, 0, len(planned))
	for name, m := range planned {
		if s := shareOf(name, m); s.amt != nil {
			shares = append(shares, s)
		}
	}
	slices.SortFunc(shares, func(a, b nodeShare) int { return strings.Compare(a.node, b.node) })
	return shares
}

// podsThatFit is how many pods requesting req (at most limit) fit in free minus
// reserved minus extra.
func podsThatFit(free, reserved vec, req []resAmt, extra vec, limit int32) int32 {
	k := int64(limit)
	for _, r := range req {
		if r.amt == 0 {
			continue
		}
		k = min(k, max(0, free.at(r.res)-reserved.at(r.res)-extra.at(r.res))/r.amt)
	}
	return int32(k)
}

// planOnNodes is the reservation of an admitted workload on the capacity known
// now: its pods spread over its domain's nodes as they fit and, while the new
// nodes it booked are still to come (keep, from bookings.keepsNewNodes), those nodes in their pools —
// always while the booking is in flight, once provisioned only while the
// domain's nodes cannot hold the gang yet. Pods that fit nowhere and have no new
// node coming are charged to the domain's first node, so that the domain's total
// is right even when the cluster is over-committed. Used when the engine learns
// of an admission it did not plan (a restart, a different admission), and when a
// provisioned gang's nodes may have arrived.
func (topo *topology) planOnNodes(w *wl, keep bool) *placement {
	inFlight := keep && (w.bk == nil || w.bk.State == BookingPending)
	var p *placement
	missing := true // whether the nodes that exist cannot hold the gang
	if a := w.adm.Topology; a != nil && len(a.Domain) > 0 {
		if tf, ok := topo.flavorTopo[a.Flavor]; ok && len(a.Domain) <= len(tf.levels) {
			var shares []nodeShare
			shares, missing = replanShares(tf, w, a.Domain, !keep)
			p = &placement{assign: *a, shares: shares}
		}
	}
	if b := w.adm.Provisioning; b != nil && len(b.NewNodes) > 0 && keep && (inFlight || missing) {
		if p == nil {
			p = &placement{}
		}
		p.newNodes = maps.Clone(b.NewNodes)
	}
	return p
}

// replanShares spreads w's pods over the domain's nodes as they fit; with
// charge, the pods that fit nowhere go to the domain's first node. It also
// reports whether some pods fit nowhere.
func replanShares(tf *topoFlavor, w *wl, key []string, charge bool) ([]nodeShare, bool) {
	planned := map[string]vec{}
	onNode := map[string][]int32{}
	var first *topoNode
	missing := false
	for i := range w.podSets {
		ps := &w.podSets[i]
		left := ps.count
		for _, n := range tf.nodesIn(key) {
			if !ps.admitsNode(tf, n) {
				continue
			}
			if first == nil {
				first = n
			}
			if onNode[n.name] == nil {
				onNode[n.name] = make([]int32, len(w.podSets))
			}
			k := w.apartRoom(i, onNode[n.name], podsThatFit(n.free, n.reserved, ps.req, planned[n.name], left))
			if k > 0 {
				addPlanned(planned, n.name, ps.req, k)
				onNode[n.name][i] += k
				left -= k
			}
		}
		if left > 0 {
			missing = true
			if charge && first != nil {
				addPlanned(planned, first.name, w.podSets[i].req, left)
			}
		}
	}
	return sharesOf(planned), missing
}

func addPlanned(planned map[string]vec, node string, req []resAmt, k int32) {
	m := planned[node]
	for _, r := range req {
		m.add(r.res, r.amt*int64(k))
	}
	planned[node] = m
}

func (topo *topology) msgUnknownLevel(c *cqState, flavors []int, level string) string {
	var parts []string
	for gi, fi := range flavors {
		if fi < 0 {
			continue
		}
		name := c.groups[gi].flavors[fi].name
		var levels []string
		if tf, ok := topo.flavorTopo[name]; ok {
			levels = tf.levels
		}
		parts = append(parts, fmt.Sprintf("%s %q", name, levels))
	}
	return fmt.Sprintf("topology level %q is not a level of the workload's flavor (%s): use one of the flavor's topologyLevels, or add it",
		level, strings.Join(parts, ", "))
}

func (nm *names) msgNoDomain(tf *topoFlavor, w *wl, flavor string, l int, suffix string) string {
	dom := w.dominant()
	note := w.constraintNote()
	if l < 0 {
		return fmt.Sprintf("the free capacity of flavor %s does not hold all %d pods%s%s", flavor, w.podCount(), note, suffix)
	}
	var bestKey []string
	var bestFree int64 = -1
	for _, key := range domainsOf(tf, l, false) {
		var free int64
		for _, n := range tf.nodesIn(key) {
			if w.admitsAny(tf, n) {
				free += max(0, n.left(dom, nil))
			}
		}
		if free > bestFree {
			bestKey, bestFree = key, free
		}
	}
	if bestKey == nil {
		return fmt.Sprintf("no node of flavor %s has the %s label: no domain to place the gang in%s", flavor, tf.levels[l], suffix)
	}
	return fmt.Sprintf("no %s domain of flavor %s has free capacity for all %d pods%s; most free: %s %s in %s=%s%s",
		tf.levels[l], flavor, w.podCount(), note, fmtAmount(bestFree), nm.resources[dom], tf.levels[l], bestKey[l], suffix)
}

// msgNeverFits says that no domain could ever hold the gang, and what the
// largest one offers.
func (nm *names) msgNeverFits(tf *topoFlavor, w *wl, flavor string, l int, withPools bool) string {
	dom := w.dominant()
	what := "its nodes"
	if withPools {
		what = "its nodes and its largest CapacityPool at its maximum (a scale-up grows one node group)"
	}
	level := "flavor"
	if l >= 0 {
		level = tf.levels[l] + " domain of flavor"
	}
	var bestKey []string
	var most int64 = -1
	for _, key := range domainsOf(tf, max(l, -1), withPools) {
		var total int64
		for _, n := range tf.nodesIn(key) {
			if w.admitsAny(tf, n) {
				total += n.alloc.at(dom)
			}
		}
		if withPools {
			var largest int64
			for _, p := range tf.pools {
				if inDomain(tf, p.labels, key) && w.admitsAnyPool(tf, p) {
					largest = max(largest, p.node.at(dom)*int64(p.avail))
				}
			}
			total += largest
		}
		if total > most {
			bestKey, most = key, total
		}
	}
	host := withPools && isHostLevel(tf, l)
	if host {
		what = "its nodes and one new node of a CapacityPool"
	}
	msg := fmt.Sprintf("no %s %s can ever hold all %d pods (%s %s)%s, even with %s", level, flavor, w.podCount(),
		fmtAmount(w.reqAmt(dom)), nm.resources[dom], w.constraintNote(), what)
	if l >= 0 && bestKey != nil {
		msg += fmt.Sprintf("; the largest, %s=%s, has %s", tf.levels[l], bestKey[l], fmtAmount(max(most, 0)))
	}
	if host {
		msg += nm.msgNewNodes(tf, w, l)
	}
	return msg + ": ask for a coarser level, split the gang, or add capacity"
}

// podCount is the number of pods of the gang.
func (w *wl) podCount() int64 {
	var n int64
	for _, ps := range w.podSets {
		n += int64(ps.count)
	}
	return n
}
