package admission

import (
	"fmt"
	"slices"
	"strings"
)

// A gang that must fit one node. At the hostname level every node is a
// domain of its own, and so is every node a CapacityPool can still create:
// its template carries no hostname (the node is named when it joins), so a
// pool lies in no hostname domain of its labels, and without this rule a
// gang Required on one host could only wait for an existing node to empty.
//
// A gang required (or preferred) at the hostname level that no existing
// node holds is therefore placed on ONE new node of a pool whose one node
// holds the whole gang — its pods' filters and tolerations admitting the
// pool's labels and taints, as for every booking — and the booking asks for
// that one node. Its admission names the domain down to the coarser levels
// (the pool's values) and leaves the hostname value empty: the node does
// not exist yet. A gang at the hostname level is never planned over two
// new nodes, and never over an existing node and a new one.
//
// Once the autoscaler has provisioned the booking, the gang does not start
// until a node of that pool, in that domain, holds the whole gang: the
// start decision (BookingStart) names the node, the caller writes it into
// the admission, and the gang's pods are pinned to it by hostname. Until
// then its reservation stays in the pool; a booking that expires first
// fails as any booking that expires before its gang started.

// HostnameLevel is the node label key that names one node: the topology
// level at which a pool's future node is a domain of its own.
const HostnameLevel = "kubernetes.io/hostname"

// isHostLevel reports whether level l of tf is the hostname level.
func isHostLevel(tf *topoFlavor, l int) bool {
	return l >= 0 && l < len(tf.levels) && tf.levels[l] == HostnameLevel
}

// AwaitsNode reports whether the assignment is a hostname domain whose node
// is still to be created: its hostname value is empty until the booking's
// node joins and the gang is pinned to it.
func (a *TopologyAssignment) AwaitsNode() bool {
	return a != nil && a.Level == HostnameLevel && len(a.Domain) > 0 && a.Domain[len(a.Domain)-1] == ""
}

// newNodeKey is the hostname domain (levels 0..l) of a node pool p can still
// create: the pool's values of the coarser levels, and "" for the node not
// named yet. ok is false for a pool that does not name every coarser level
// (its nodes are in no domain of them), or that names a hostname itself.
func newNodeKey(tf *topoFlavor, p *topoPool, l int) ([]string, bool) {
	if _, named := p.labels[tf.levels[l]]; named {
		return nil, false
	}
	key := make([]string, l+1)
	if l > 0 {
		coarser, ok := domainKey(tf, p.labels, l-1)
		if !ok {
			return nil, false
		}
		copy(key, coarser)
	}
	return key, true
}

// podCounts are the pods of every pod set of w, none placed yet.
func (w *wl) podCounts() []int32 {
	out := make([]int32, len(w.podSets))
	for i, ps := range w.podSets {
		out[i] = ps.count
	}
	return out
}

// holdsGang reports whether one new node of pool p holds every pod of w
// (each pod set on the pool only if it admits the pool's labels and taints).
func holdsGang(tf *topoFlavor, p *topoPool, w *wl) bool {
	_, ok := newNodesFor(tf, p, w, w.podCounts(), 1)
	return ok
}

// searchNewNode places w on one new node of the flavor's pools at the
// hostname level l: of the pools whose one node holds the whole gang and
// that can still create a node, the one the pods prefer, then the one whose
// node the gang leaves the least of its largest resource free (so larger
// nodes stay for larger gangs), then the first by name. Domains whose
// bookings failed are skipped. nil when no pool can.
func (topo *topology) searchNewNode(tf *topoFlavor, flavor string, w *wl, l int, avoid []TopologyAssignment) *placement {
	var best *placement
	var bestScore, bestLeft int64
	dom := w.dominant()
	for _, p := range tf.pools {
		key, ok := newNodeKey(tf, p, l)
		if !ok || p.avail-p.reserved < 1 || avoided(avoid, flavor, key) || !holdsGang(tf, p, w) {
			continue
		}
		var score int64
		for i := range w.podSets {
			score += int64(w.podSets[i].count) * w.podSets[i].score(p.labels)
		}
		left := p.node.at(dom) - w.reqAmt(dom)
		if best == nil || score > bestScore || (score == bestScore && left < bestLeft) {
			best = &placement{assign: TopologyAssignment{Level: tf.levels[l], Levels: tf.levels[:l+1], Domain: key},
				newNodes: map[string]int32{p.name: 1}}
			bestScore, bestLeft = score, left
		}
	}
	return best
}

// newNodesEver counts the pools that could create a node in a hostname
// domain of level l, and reports whether one of them, at its maximum, could
// create one that holds the whole gang.
func newNodesEver(tf *topoFlavor, w *wl, l int) (int, bool) {
	n, ever := 0, false
	for _, p := range tf.pools {
		if _, ok := newNodeKey(tf, p, l); !ok {
			continue
		}
		n++
		if p.avail >= 1 && holdsGang(tf, p, w) {
			ever = true
		}
	}
	return n, ever
}

// msgNewNodes says, for a gang that must fit one node and that no pool's new
// node takes now, why: no pool's node can hold the whole gang (naming the
// largest node a pool offers against what the gang needs), or the pools
// whose node could cannot create one now. "" when the flavor has no pool
// at the level.
func (nm *names) msgNewNodes(tf *topoFlavor, w *wl, l int) string {
	var fit []string
	var largest *topoPool
	short := int32(-1) // the first resource no pool's node holds enough of
	for _, r := range w.req {
		most := int64(-1)
		var at *topoPool
		for _, p := range tf.pools {
			if _, ok := newNodeKey(tf, p, l); !ok || !w.admitsAnyPool(tf, p) {
				continue
			}
			if p.node.at(r.res) > most {
				most, at = p.node.at(r.res), p
			}
		}
		if at != nil && most < r.amt && short < 0 {
			short, largest = r.res, at
		}
	}
	for _, p := range tf.pools {
		if _, ok := newNodeKey(tf, p, l); ok && holdsGang(tf, p, w) {
			fit = append(fit, p.name)
		}
	}
	switch {
	case len(fit) > 0:
		return fmt.Sprintf("; the CapacityPools whose node holds the whole gang (%s) can create no more nodes now (at maxNodes, or their nodes promised to other gangs)",
			strings.Join(fit, ", "))
	case largest != nil:
		return fmt.Sprintf("; the gang must fit one node, and no CapacityPool creates one that holds it: it needs %s %s on one node, the largest node a pool offers has %s (pool %s)",
			fmtAmount(w.reqAmt(short)), nm.resources[short], fmtAmount(largest.node.at(short)), largest.name)
	case slices.ContainsFunc(tf.pools, func(p *topoPool) bool { _, ok := newNodeKey(tf, p, l); return ok }):
		return "; the gang must fit one node, and no CapacityPool creates one that holds it (its pods' constraints, taints, or how many of them must share the node)"
	}
	return ""
}

// pinNewNode finds, for a provisioned booking of a gang that awaits its new
// node, a node of the booked pool's domain — one that carries the pool's
// labels (any node of the domain if the pool is gone) — that holds the
// whole gang now, and moves the gang's reservation
// onto it. It returns the pinned domain, or nil while no such node exists
// (the gang's reservation then stays where it was).
func (books *bookings) pinNewNode(w *wl) *TopologyAssignment {
	a := w.adm.Topology
	tf, ok := books.topo.flavorTopo[a.Flavor]
	if !ok || len(a.Domain) != len(a.Levels) || len(a.Domain) > len(tf.levels) || tf.levels[len(a.Domain)-1] != HostnameLevel {
		return nil
	}
	var pools []*topoPool
	if b := w.adm.Provisioning; b != nil {
		for name := range b.NewNodes {
			if p, ok := books.topo.pools[name]; ok {
				pools = append(pools, p)
			}
		}
	}
	// The gang's own reservation is returned first, so that a node it was
	// pinned to before (a decision rolled back) is found again.
	books.topo.reserve(w.placed, -1)
	dom := w.dominant()
	coarser := a.Domain[:len(a.Domain)-1]
	var best *topoNode
	var bestShares []nodeShare
	var bestLeft int64
	for _, n := range tf.nodesIn(coarser) {
		host, ok := n.labels[HostnameLevel]
		if !ok || host == "" || (len(pools) > 0 && !slices.ContainsFunc(pools, func(p *topoPool) bool { return carries(n.labels, p.labels) })) {
			continue
		}
		pk := books.topo.packNodes(tf, w, append(slices.Clone(coarser), host), dom, false, false)
		if pk.remaining != nil {
			continue
		}
		if left := n.left(dom, nil) - w.reqAmt(dom); best == nil || left < bestLeft {
			best, bestShares, bestLeft = n, pk.shares, left
		}
	}
	if best == nil {
		books.topo.reserve(w.placed, 1)
		return nil
	}
	pinned := cloneAssignment(*a)
	pinned.Domain[len(pinned.Domain)-1] = best.labels[HostnameLevel]
	w.placed = &placement{assign: pinned, shares: bestShares}
	books.topo.reserve(w.placed, 1)
	return &pinned
}

// carries reports whether labels hold every label of want.
func carries(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// pinOnStart is, for a provisioned booking about to start, the domain it
// is pinned to: nil for a gang that awaits no node. wait is true while a
// gang that must fit one node waits for its node to join; it is then
// listed, so that the next change of capacity decides its booking again.
func (books *bookings) pinOnStart(w *wl) (pinned *TopologyAssignment, wait bool) {
	if !w.adm.Topology.AwaitsNode() {
		return nil, false
	}
	if pinned = books.pinNewNode(w); pinned == nil {
		books.pinning[w] = struct{}{}
		return nil, true
	}
	delete(books.pinning, w)
	return pinned, false
}

// wakePinning has the bookings of gangs awaiting their new node decided
// again in the next Cycle: capacity changed, and their node may have
// joined.
func (books *bookings) wakePinning() {
	for w := range books.pinning {
		if _, inFlight := books.booking[w]; !inFlight || books.workloads[w.key] != w {
			delete(books.pinning, w)
			continue
		}
		books.bookingDirty[w.key] = struct{}{}
	}
}

// markBooking qualifies the pending update just reported for w, a gang
// waiting for capacity (TopologyUnavailable), with whether the flavor it
// waits for books capacity (PendingUpdate.BookingFlavor).
func (topo *topology) markBooking(w *wl, out outcome, res *Result) {
	if out.reason != TopologyUnavailable || len(res.Pending) == 0 || res.Pending[len(res.Pending)-1].Key != w.key {
		return
	}
	if tf, ok := topo.flavorTopo[out.flavor]; ok && tf.policy.books() {
		res.Pending[len(res.Pending)-1].BookingFlavor = true
	}
}
