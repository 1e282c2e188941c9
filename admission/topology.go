package admission

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Topology-aware placement. A workload with a TopologyRequest is admitted only
// when, besides quota, the free capacity of one topology domain holds every pod
// of the gang; the admission names the domain, and the engine reserves the
// capacity it planned on until the workload is released, so that two gangs are
// never promised the same capacity.
//
// The capacity model is the caller's view of the cluster: Flavors give each
// ResourceFlavor's topology levels (node label keys, coarsest first), Nodes give
// each schedulable node's flavors, labels and free capacity (allocatable minus
// the requests of the pods bound there, not counting pods of workloads the engine
// placed, whose capacity the engine reserves itself). The engine re-plans
// reservations from an admission's domain when it learns of an admitted workload
// (for example after a restart).

// TopologyMode says how strictly a gang must stay in one domain.
type TopologyMode string

const (
	// TopologyRequired admits the gang only into one domain of the level.
	TopologyRequired TopologyMode = "Required"
	// TopologyPreferred places the gang in one domain of the level if one has room,
	// else in one domain of the finest coarser level that has, else anywhere.
	TopologyPreferred TopologyMode = "Preferred"
)

// TopologyRequest is a gang's topology constraint.
type TopologyRequest struct {
	// Mode is TopologyRequired or TopologyPreferred.
	Mode TopologyMode
	// Level is a node label key among the levels of the workload's flavor.
	Level string
}

// TopologyAssignment is the domain a gang was admitted into.
type TopologyAssignment struct {
	// Flavor whose nodes the gang was placed on.
	Flavor string
	// Level of the domain; coarser than asked when a Preferred request did not fit.
	Level string
	// Levels are the flavor's level keys from the coarsest down to Level.
	Levels []string
	// Domain holds the label values of the flavor's levels, from the coarsest down to
	// Level: the node selector that keeps the gang's pods in the domain.
	Domain []string
}

// Flavor is the engine's view of a ResourceFlavor's topology.
type Flavor struct {
	// Name of the ResourceFlavor.
	Name string
	// Levels are node label keys, coarsest first (for example zone, rack, hostname).
	Levels []string
	// Provisioning says when an admission on this flavor books its capacity
	// through a ProvisioningRequest; "" means ProvisionNever.
	Provisioning ProvisioningMode
}

// Node is one schedulable node as capacity.
type Node struct {
	// Name of the node.
	Name string
	// Flavors the node belongs to (its labels and taints match them).
	Flavors []string
	// Labels of the node; those of the flavors' levels place it in the topology.
	Labels map[string]string
	// Free is allocatable minus the requests of pods bound to the node, not counting
	// pods of workloads the engine placed.
	Free Resources
}

// topoFlavor is a flavor's topology, provisioning mode, nodes and pools.
type topoFlavor struct {
	levels []string
	mode   ProvisioningMode
	nodes  []*topoNode // sorted by name
	pools  []*topoPool // sorted by name
}

// topoNode is a node's capacity: free as reported, and reserved by placements.
type topoNode struct {
	name     string
	flavors  []string
	labels   map[string]string
	free     map[int32]int64
	reserved map[int32]int64
}

// left is what node n has left of resource r after reservations and extra.
func (n *topoNode) left(r int32, extra map[int32]int64) int64 {
	return n.free[r] - n.reserved[r] - extra[r]
}

// nodeShare is capacity a placement takes on one node.
type nodeShare struct {
	node string
	amt  []resAmt
}

// placement is a planned admission on capacity: the domain (unset: unpinned), the
// capacity reserved on existing nodes, and, when it books capacity first, the nodes
// to create per pool.
type placement struct {
	assign TopologyAssignment
	shares []nodeShare
	// provision: the admission books its capacity through a ProvisioningRequest;
	// scaleUp: nodes must be created (else existing capacity is booked).
	provision, scaleUp bool
	newNodes           map[string]int32
}

// UpsertFlavor creates or updates a flavor's topology levels. Workloads waiting for
// topology are re-evaluated in the next Cycle.
func (e *Engine) UpsertFlavor(f Flavor) error {
	if f.Name == "" {
		return errors.New("invalid flavor: name must not be empty")
	}
	for i, l := range f.Levels {
		if l == "" || slices.Contains(f.Levels[:i], l) {
			return fmt.Errorf("invalid flavor %q: levels must be non-empty and distinct, got %q", f.Name, f.Levels)
		}
	}
	switch f.Provisioning {
	case "", ProvisionNever, ProvisionIfNeeded, ProvisionAlways:
	default:
		return fmt.Errorf("invalid flavor %q: provisioning %q must be Never, IfNeeded or Always", f.Name, f.Provisioning)
	}
	tf := e.topoFlavorFor(f.Name)
	tf.levels = slices.Clone(f.Levels)
	tf.mode = f.Provisioning
	e.capacityChanged()
	return nil
}

// DeleteFlavor forgets a flavor's topology levels (its nodes stay known).
func (e *Engine) DeleteFlavor(name string) {
	if tf, ok := e.flavorTopo[name]; ok {
		tf.levels, tf.mode = nil, ""
		e.capacityChanged()
	}
}

func (e *Engine) topoFlavorFor(name string) *topoFlavor {
	tf, ok := e.flavorTopo[name]
	if !ok {
		tf = &topoFlavor{}
		e.flavorTopo[name] = tf
	}
	return tf
}

// UpsertNode creates or updates a node's capacity. Reservations on it are kept.
func (e *Engine) UpsertNode(n Node) error {
	if n.Name == "" {
		return errors.New("invalid node: name must not be empty")
	}
	free, err := e.capacityOf(n.Free)
	if err != nil {
		return fmt.Errorf("invalid node %q: free %w", n.Name, err)
	}
	tn, ok := e.nodes[n.Name]
	if !ok {
		tn = &topoNode{name: n.Name, reserved: map[int32]int64{}}
		e.nodes[n.Name] = tn
	}
	e.unlinkNode(tn)
	tn.flavors = slices.Clone(n.Flavors)
	slices.Sort(tn.flavors)
	tn.flavors = slices.Compact(tn.flavors)
	tn.labels = maps.Clone(n.Labels)
	tn.free = free
	for _, f := range tn.flavors {
		tf := e.topoFlavorFor(f)
		tf.nodes = insertByName(tf.nodes, tn, func(x *topoNode) string { return x.name })
	}
	e.capacityChanged()
	return nil
}

// DeleteNode forgets a node. Reservations on it stay with their workloads (the
// pods there are gone; the workloads are typically evicted by the caller).
func (e *Engine) DeleteNode(name string) {
	tn, ok := e.nodes[name]
	if !ok {
		return
	}
	e.unlinkNode(tn)
	tn.flavors, tn.free = nil, nil
	if len(tn.reserved) == 0 {
		delete(e.nodes, name)
	}
	e.capacityChanged()
}

func (e *Engine) unlinkNode(tn *topoNode) {
	for _, f := range tn.flavors {
		tf := e.flavorTopo[f]
		tf.nodes = slices.DeleteFunc(tf.nodes, func(x *topoNode) bool { return x == tn })
	}
}

// capacityChanged makes every workload waiting for topology capacity a candidate
// again.
func (e *Engine) capacityChanged() {
	for _, w := range e.topoWaiting {
		w.topoWait = false
		if w.phase == phasePending && e.workloads[w.key] == w {
			c := e.cqs[w.cqName]
			if e.work != nil {
				e.freshLater = append(e.freshLater, w)
			} else {
				e.makeFresh(c, w)
			}
			e.rekey(c)
		}
	}
	e.topoWaiting = e.topoWaiting[:0]
}

// topologyFlavor returns the flavor, among those chosen for w's resource groups,
// whose levels include level, with the level's index.
func (e *Engine) topologyFlavor(c *cqState, flavors []int, level string) (string, *topoFlavor, int) {
	for gi, fi := range flavors {
		if fi < 0 {
			continue
		}
		name := c.groups[gi].flavors[fi].name
		if tf, ok := e.flavorTopo[name]; ok {
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
func (e *Engine) placeIn(c *cqState, w *wl, flavors []int) (*placement, PendingReason, string, string) {
	p, reason, msg, flavor := e.placeAvoiding(c, w, flavors, w.avoid)
	if reason == TopologyUnavailable && len(w.avoid) > 0 {
		return e.placeAvoiding(c, w, flavors, nil)
	}
	return p, reason, msg, flavor
}

// placeAvoiding is placeIn that skips the domains in avoid.
func (e *Engine) placeAvoiding(c *cqState, w *wl, flavors []int, avoid [][]string) (*placement, PendingReason, string, string) {
	var name string
	var tf *topoFlavor
	li := -1
	if w.topo != nil {
		name, tf, li = e.topologyFlavor(c, flavors, w.topo.Level)
		if tf == nil {
			return nil, UnknownTopologyLevel, e.msgUnknownLevel(c, flavors, w.topo.Level), name
		}
	} else if name, tf = e.provisioningFlavor(c, flavors); tf == nil {
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
		p := e.search(tf, w, l, false, avoid)
		if p == nil {
			continue
		}
		if l < 0 {
			// Unpinned: the pods may land anywhere, so the engine reserves nothing
			// on nodes (the pods are counted once they are bound).
			p.shares = nil
		}
		if tf.mode == ProvisionAlways {
			p.provision = true
		} else if l < 0 {
			// Fits somewhere on existing capacity without pinning: nothing to book
			// or reserve (the pods are counted once they are bound).
			return &placement{}, "", "", name
		}
		p.assign.Flavor = name
		return p, "", "", name
	}
	if tf.mode == ProvisionNever || tf.mode == "" {
		if w.topo != nil && w.topo.Mode == TopologyPreferred {
			return &placement{}, "", "", name // anywhere: no pinning, no reservation
		}
		return nil, TopologyUnavailable, e.msgNoDomain(tf, w, name, li, ""), name
	}
	if len(tf.pools) == 0 {
		if w.topo != nil && w.topo.Mode == TopologyRequired {
			return nil, TopologyUnavailable, e.msgNoDomain(tf, w, name, li,
				"; the flavor has no CapacityPool, so berth cannot ask for capacity in one domain"), name
		}
		// Without CapacityPools berth cannot tell where capacity can be created:
		// an unpinned request lets the autoscaler choose.
		return &placement{provision: true, scaleUp: true}, "", "", name
	}
	for _, l := range levels {
		if p := e.search(tf, w, l, true, avoid); p != nil {
			if l < 0 {
				p.shares = nil
			}
			p.provision, p.scaleUp = true, len(p.newNodes) > 0
			p.assign.Flavor = name
			return p, "", "", name
		}
	}
	return nil, TopologyUnavailable, e.msgNoDomain(tf, w, name, li, ", even with the nodes its CapacityPools can still create"), name
}

// search tries every domain of level l (-1: all the flavor's capacity as one,
// unpinned) and returns the best placement: one on existing free capacity if any
// domain has it — the tightest, leaving the least of the gang's largest resource
// free, so large free domains stay whole — else, withPools, the one needing the
// fewest new nodes (then the tightest). Ties go to the domain that sorts first.
// Domains the workload's bookings failed in are skipped.
func (e *Engine) search(tf *topoFlavor, w *wl, l int, withPools bool, avoid [][]string) *placement {
	var best *placement
	var bestNew int32
	var bestLeft int64
	dom := w.req[0].res // the gang's dominant resource: its largest total request
	for _, r := range w.req {
		if r.amt > w.reqAmt(dom) {
			dom = r.res
		}
	}
	for _, key := range domainsOf(tf, l, withPools) {
		if slices.ContainsFunc(avoid, func(a []string) bool { return slices.Equal(a, key) }) {
			continue
		}
		shares, remaining, left := e.packNodes(tf, w, key, dom)
		var newNodes map[string]int32
		var total int32
		if remaining != nil {
			if !withPools {
				continue
			}
			var ok bool
			if newNodes, total, ok = packPools(tf, w, key, remaining); !ok {
				continue
			}
		}
		if best == nil || total < bestNew || (total == bestNew && left < bestLeft) {
			best = &placement{shares: shares, newNodes: newNodes}
			if l >= 0 {
				best.assign = TopologyAssignment{Level: tf.levels[l], Levels: tf.levels[:l+1], Domain: key}
			}
			bestNew, bestLeft = total, left
		}
	}
	return best
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

// domainsOf lists the distinct domains (label values of levels 0..l) of the
// flavor's nodes — and pools, withPools — in sorted order. Capacity missing a
// level label is in none. Level -1 is one domain: everything.
func domainsOf(tf *topoFlavor, l int, withPools bool) [][]string {
	if l < 0 {
		return [][]string{{}}
	}
	var out [][]string
	add := func(labels map[string]string) {
		key, ok := domainKey(tf, labels, l)
		if ok && !slices.ContainsFunc(out, func(k []string) bool { return slices.Equal(k, key) }) {
			out = append(out, key)
		}
	}
	for _, n := range tf.nodes {
		add(n.labels)
	}
	if withPools {
		for _, p := range tf.pools {
			add(p.labels)
		}
	}
	slices.SortFunc(out, slices.Compare)
	return out
}

func domainKey(tf *topoFlavor, labels map[string]string, l int) ([]string, bool) {
	key := make([]string, l+1)
	for i := 0; i <= l; i++ {
		v, ok := labels[tf.levels[i]]
		if !ok {
			return nil, false
		}
		key[i] = v
	}
	return key, true
}

func inDomain(tf *topoFlavor, labels map[string]string, key []string) bool {
	for i, v := range key {
		if got, ok := labels[tf.levels[i]]; !ok || got != v {
			return false
		}
	}
	return true
}

// packNodes places w's pods on the domain's nodes, pod set by pod set, filling
// each node (in name order) before the next. It returns the planned shares, the
// pods per pod set that found no node (nil: all placed), and what is left of
// resource dom on the domain's nodes afterwards.
func (e *Engine) packNodes(tf *topoFlavor, w *wl, key []string, dom int32) ([]nodeShare, []int32, int64) {
	planned := map[string]map[int32]int64{}
	var left int64
	remaining := make([]int32, len(w.podSets))
	for i, ps := range w.podSets {
		remaining[i] = ps.count
	}
	for _, n := range tf.nodes {
		if !inDomain(tf, n.labels, key) {
			continue
		}
		extra := planned[n.name]
		for i, ps := range w.podSets {
			k := podsThatFit(n.free, n.reserved, ps.req, extra, remaining[i])
			if k == 0 {
				continue
			}
			if extra == nil {
				extra = map[int32]int64{}
				planned[n.name] = extra
			}
			for _, r := range ps.req {
				extra[r.res] += r.amt * int64(k)
			}
			remaining[i] -= k
		}
		left += max(0, n.left(dom, extra))
	}
	shares := sharesOf(planned)
	for _, r := range remaining {
		if r > 0 {
			return shares, remaining, left
		}
	}
	return shares, nil, left
}

// sharesOf turns planned amounts per node into sorted shares.
func sharesOf(planned map[string]map[int32]int64) []nodeShare {
	shares := make([]nodeShare, 0, len(planned))
	for name, m := range planned {
		s := nodeShare{node: name}
		for r, a := range m {
			s.amt = append(s.amt, resAmt{res: r, amt: a})
		}
		slices.SortFunc(s.amt, func(a, b resAmt) int { return int(a.res) - int(b.res) })
		shares = append(shares, s)
	}
	slices.SortFunc(shares, func(a, b nodeShare) int { return strings.Compare(a.node, b.node) })
	return shares
}

// podsThatFit is how many pods requesting req (at most limit) fit in free minus
// reserved minus extra.
func podsThatFit(free, reserved map[int32]int64, req []resAmt, extra map[int32]int64, limit int32) int32 {
	k := int64(limit)
	for _, r := range req {
		if r.amt == 0 {
			continue
		}
		k = min(k, max(0, free[r.res]-reserved[r.res]-extra[r.res])/r.amt)
	}
	return int32(k)
}

// reserve charges a placement's shares to its nodes and its new nodes to its
// pools (sign 1), or returns them (-1).
func (e *Engine) reserve(p *placement, sign int64) {
	if p == nil {
		return
	}
	for _, s := range p.shares {
		n, ok := e.nodes[s.node]
		if !ok {
			n = &topoNode{name: s.node, reserved: map[int32]int64{}}
			e.nodes[s.node] = n
		}
		for _, r := range s.amt {
			n.reserved[r.res] += sign * r.amt
			if n.reserved[r.res] == 0 {
				delete(n.reserved, r.res)
			}
		}
		if len(n.reserved) == 0 && n.free == nil {
			delete(e.nodes, s.node) // deleted node whose last reservation went
		}
	}
	for name, k := range p.newNodes {
		pl, ok := e.pools[name]
		if !ok {
			pl = &topoPool{name: name}
			e.pools[name] = pl
		}
		pl.reserved += int32(sign) * k
		if pl.reserved == 0 && pl.flavor == "" {
			delete(e.pools, name) // deleted pool whose last reservation went
		}
	}
	if sign < 0 {
		e.capacityChanged()
	}
}

// replan rebuilds the reservation of a workload admitted into a domain the engine
// did not plan itself (an admission rebuilt after a restart, confirmed with a
// different domain, or whose booked capacity now exists): its pods are spread over
// the domain's nodes as they fit, and any that fit nowhere are charged to the
// domain's first node, so the domain's total is right even when the cluster is
// over-committed. Nodes still to be created for it stay reserved in their pools.
func (e *Engine) replan(w *wl) *placement {
	var p *placement
	if a := w.adm.Topology; a != nil && len(a.Domain) > 0 {
		if tf, ok := e.flavorTopo[a.Flavor]; ok && len(a.Domain) <= len(tf.levels) {
			p = &placement{assign: *a, shares: replanShares(tf, w, a.Domain)}
		}
	}
	if b := w.adm.Provisioning; b != nil && len(b.NewNodes) > 0 {
		if p == nil {
			p = &placement{}
		}
		p.newNodes = maps.Clone(b.NewNodes)
	}
	return p
}

func replanShares(tf *topoFlavor, w *wl, key []string) []nodeShare {
	planned := map[string]map[int32]int64{}
	var first *topoNode
	for i, ps := range w.podSets {
		left := ps.count
		for _, n := range tf.nodes {
			if !inDomain(tf, n.labels, key) {
				continue
			}
			if first == nil {
				first = n
			}
			k := podsThatFit(n.free, n.reserved, ps.req, planned[n.name], left)
			if k > 0 {
				addPlanned(planned, n.name, ps.req, k)
				left -= k
			}
		}
		if left > 0 && first != nil {
			addPlanned(planned, first.name, w.podSets[i].req, left)
		}
	}
	return sharesOf(planned)
}

func addPlanned(planned map[string]map[int32]int64, node string, req []resAmt, k int32) {
	m := planned[node]
	if m == nil {
		m = map[int32]int64{}
		planned[node] = m
	}
	for _, r := range req {
		m[r.res] += r.amt * int64(k)
	}
}

func (e *Engine) msgUnknownLevel(c *cqState, flavors []int, level string) string {
	var parts []string
	for gi, fi := range flavors {
		if fi < 0 {
			continue
		}
		name := c.groups[gi].flavors[fi].name
		var levels []string
		if tf, ok := e.flavorTopo[name]; ok {
			levels = tf.levels
		}
		parts = append(parts, fmt.Sprintf("%s %q", name, levels))
	}
	return fmt.Sprintf("topology level %q is not a level of the workload's flavor (%s): use one of the flavor's topologyLevels, or add it",
		level, strings.Join(parts, ", "))
}

func (e *Engine) msgNoDomain(tf *topoFlavor, w *wl, flavor string, l int, suffix string) string {
	dom := w.req[0].res
	for _, r := range w.req {
		if r.amt > w.reqAmt(dom) {
			dom = r.res
		}
	}
	if l < 0 {
		return fmt.Sprintf("the free capacity of flavor %s does not hold all %d pods%s", flavor, w.podCount(), suffix)
	}
	var bestKey []string
	var bestFree int64 = -1
	for _, key := range domainsOf(tf, l, false) {
		var free int64
		for _, n := range tf.nodes {
			if inDomain(tf, n.labels, key) {
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
	return fmt.Sprintf("no %s domain of flavor %s has free capacity for all %d pods; most free: %s %s in %s=%s%s",
		tf.levels[l], flavor, w.podCount(), fmtAmount(bestFree), e.resources[dom], tf.levels[l], bestKey[l], suffix)
}

// podCount is the number of pods of the gang.
func (w *wl) podCount() int64 {
	var n int64
	for _, ps := range w.podSets {
		n += int64(ps.count)
	}
	return n
}

// capacityOf interns and validates an amount of capacity per resource.
func (e *Engine) capacityOf(rs Resources) (map[int32]int64, error) {
	out := make(map[int32]int64, len(rs))
	for r, q := range rs {
		if r == "" || q < 0 || q > MaxAmount {
			return nil, fmt.Errorf("%s=%d: must be between 0 and %d", r, q, MaxAmount)
		}
		out[e.resID(r)] = q
	}
	return out, nil
}

// insertByName inserts x into s, kept sorted by name.
func insertByName[T any](s []T, x T, name func(T) string) []T {
	i, _ := slices.BinarySearchFunc(s, name(x), func(y T, n string) int { return strings.Compare(name(y), n) })
	return slices.Insert(s, i, x)
}
