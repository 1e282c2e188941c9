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
	// through a ProvisioningRequest, and how bookings are retried; the zero value
	// never books.
	Provisioning ProvisioningPolicy
	// Tolerations are added to the pods released on the flavor, so every pod
	// set placed on it tolerates what they match (see taints.go).
	Tolerations []Toleration
}

// Node is one schedulable node as capacity.
type Node struct {
	// Name of the node.
	Name string
	// Flavors the node belongs to (its labels match theirs; its taints are
	// matched per pod set, see Taints).
	Flavors []string
	// Labels of the node; those of the flavors' levels place it in the topology.
	Labels map[string]string
	// Free is allocatable minus the requests of pods bound to the node, not counting
	// pods of workloads the engine placed.
	Free Resources
	// Allocatable is what the node offers when empty: whether a gang could ever
	// fit a domain is judged from it. Unset: unknown, and no gang is judged unable
	// ever to fit a domain of the node.
	Allocatable Resources
	// Taints of the node: a pod set that does not tolerate one whose effect
	// is NoSchedule or NoExecute cannot use the node (see taints.go).
	Taints []Taint
}

// topoFlavor is a flavor's topology, provisioning policy, nodes and pools.
type topoFlavor struct {
	levels []string
	policy ProvisioningPolicy
	// tols are the flavor's tolerations, which every pod set placed on it has.
	tols  []Toleration
	nodes []*topoNode // sorted by name
	pools []*topoPool // sorted by name
	// index caches the flavor's domains and each domain's nodes; nil once
	// its nodes, pools or levels changed (see domainIndex).
	index *domainIndex
}

// domainIndex caches what placement asks of a flavor's topology in every
// evaluation: the domains of each level, and the nodes of each domain in
// name order. Without it each evaluation of a topology gang walked every
// node of the flavor once per domain, which on a cluster of hundreds of
// nodes dominated a cycle. It depends only on which nodes and pools the
// flavor has and on their labels, which change rarely (free capacity, which
// changes all the time, is not in it).
type domainIndex struct {
	// domains by level, without and with the pools' domains.
	domains map[int][2][][]string
	// nodes by domain key (its values joined by "\x00").
	nodes map[string][]*topoNode
	// left by domain key: what the domain's nodes have left, summed (each
	// node's share clamped at 0), kept up to date as capacity changes once
	// computed. A gang that asks for more of a resource than its domain has
	// left cannot fit there, whatever the packing: search skips the domain
	// without visiting its nodes.
	left map[string]vec
}

// leftIn is what the domain key's nodes have left, summed.
func (tf *topoFlavor) leftIn(key []string) vec {
	idx := tf.indexed()
	k := strings.Join(key, "\x00")
	sum, ok := idx.left[k]
	if !ok {
		for _, n := range tf.nodesIn(key) {
			sum.addAll(n.leftVec(), 1)
		}
		idx.left[k] = sum
	}
	return sum
}

// leftVec is what n has left of each resource after reservations, at
// least 0.
func (n *topoNode) leftVec() vec {
	out := make(vec, max(len(n.free), len(n.reserved)))
	for r := range out {
		out[r] = max(0, n.free.at(int32(r))-n.reserved.at(int32(r)))
	}
	return out
}

// addAll adds sign times every amount of w to v.
func (v *vec) addAll(w vec, sign int64) {
	for r, a := range w {
		if a != 0 {
			v.add(int32(r), sign*a)
		}
	}
}

// covers reports whether v holds at least every amount of req.
func (v vec) covers(req []resAmt) bool {
	for _, r := range req {
		if v.at(r.res) < r.amt {
			return false
		}
	}
	return true
}

// invalidate drops tf's domain index.
func (tf *topoFlavor) invalidate() { tf.index = nil }

// nodesIn is the flavor's nodes in the domain key, in name order (all of
// them for the empty key).
func (tf *topoFlavor) nodesIn(key []string) []*topoNode {
	if len(key) == 0 {
		return tf.nodes
	}
	idx := tf.indexed()
	k := strings.Join(key, "\x00")
	nodes, ok := idx.nodes[k]
	if !ok {
		for _, n := range tf.nodes {
			if inDomain(tf, n.labels, key) {
				nodes = append(nodes, n)
			}
		}
		idx.nodes[k] = nodes
	}
	return nodes
}

func (tf *topoFlavor) indexed() *domainIndex {
	if tf.index == nil {
		tf.index = &domainIndex{domains: map[int][2][][]string{}, nodes: map[string][]*topoNode{}, left: map[string]vec{}}
	}
	return tf.index
}

// topoNode is a node's capacity: free as reported, and reserved by placements.
type topoNode struct {
	name     string
	flavors  []string
	labels   map[string]string
	free     vec
	alloc    vec
	reserved vec
	// taints that exclude, sorted (see compileTaints).
	taints []Taint
	// fits caches which pod set filters admit the node, by filter key.
	fits map[string]bool
}

// left is what node n has left of resource r after reservations and extra.
func (n *topoNode) left(r int32, extra vec) int64 {
	return n.free.at(r) - n.reserved.at(r) - extra.at(r)
}

// vec is an amount per interned resource, indexed by its id; a resource
// beyond its length has none. Capacity is a vector rather than a map
// because placing a gang reads it for every node of a domain, resource by
// resource: the innermost loop of a topology evaluation.
type vec []int64

// at is v's amount of r.
func (v vec) at(r int32) int64 {
	if int(r) < len(v) {
		return v[r]
	}
	return 0
}

// add adds d to v's amount of r, growing v as needed.
func (v *vec) add(r int32, d int64) {
	if int(r) >= len(*v) {
		*v = append(*v, make(vec, int(r)+1-len(*v))...)
	}
	(*v)[r] += d
}

// isZero reports whether v holds nothing.
func (v vec) isZero() bool {
	for _, a := range v {
		if a != 0 {
			return false
		}
	}
	return true
}

// equal reports whether v and w hold the same amounts; an unknown (nil)
// capacity equals only another unknown one.
func (v vec) equal(w vec) bool {
	if (v == nil) != (w == nil) {
		return false
	}
	for i := range max(len(v), len(w)) {
		if v.at(int32(i)) != w.at(int32(i)) {
			return false
		}
	}
	return true
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
	// flavor whose capacity is booked (provision only).
	flavor string
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
	if err := f.Provisioning.validate(); err != nil {
		return fmt.Errorf("invalid flavor %q: %w", f.Name, err)
	}
	tf := e.topo.topoFlavorFor(f.Name)
	tf.levels = slices.Clone(f.Levels)
	tf.policy = f.Provisioning
	tf.tols = slices.Clone(f.Tolerations)
	tf.invalidate()
	e.wakes.capacityChanged()
	return nil
}

// DeleteFlavor forgets a flavor's topology levels (its nodes stay known).
func (e *Engine) DeleteFlavor(name string) {
	if tf, ok := e.topo.flavorTopo[name]; ok {
		tf.levels, tf.policy, tf.tols = nil, ProvisioningPolicy{}, nil
		tf.invalidate()
		e.wakes.capacityChanged()
	}
}

// UpsertNode creates or updates a node's capacity. Reservations on it are kept.
func (e *Engine) UpsertNode(n Node) error {
	if n.Name == "" {
		return errors.New("invalid node: name must not be empty")
	}
	free, err := e.names.capacityOf(n.Free)
	if err != nil {
		return fmt.Errorf("invalid node %q: free %w", n.Name, err)
	}
	var alloc vec
	if n.Allocatable != nil {
		if alloc, err = e.names.capacityOf(n.Allocatable); err != nil {
			return fmt.Errorf("invalid node %q: allocatable %w", n.Name, err)
		}
	}
	flavors := slices.Clone(n.Flavors)
	slices.Sort(flavors)
	flavors = slices.Compact(flavors)
	taints := compileTaints(n.Taints)
	tn, ok := e.topo.nodes[n.Name]
	if ok && tn.flavors != nil && slices.Equal(tn.flavors, flavors) && maps.Equal(tn.labels, n.Labels) &&
		slices.Equal(tn.taints, taints) {
		// Only its capacity changed, as on every pod bound or gone: its
		// place in the topology, and the domain index, stay. Less free
		// capacity cannot make a gang that waits for capacity fit, so only
		// more wakes the waiting ones.
		allocChanged, grew := !tn.alloc.equal(alloc), anyAbove(free, tn.free)
		before := tn.leftVec()
		tn.free, tn.alloc = free, alloc
		e.topo.capacityMoved(tn, before)
		switch {
		case allocChanged:
			e.wakes.capacityChanged()
		case grew:
			e.wakes.nodeGrew(tn)
		}
		return nil
	}
	if !ok {
		tn = &topoNode{name: n.Name}
		e.topo.nodes[n.Name] = tn
	}
	e.topo.unlinkNode(tn)
	tn.flavors = flavors
	tn.labels = maps.Clone(n.Labels)
	tn.taints = taints
	tn.fits = nil // the labels may have changed
	tn.free, tn.alloc = free, alloc
	for _, f := range tn.flavors {
		tf := e.topo.topoFlavorFor(f)
		tf.nodes = insertByName(tf.nodes, tn, func(x *topoNode) string { return x.name })
		tf.invalidate()
	}
	e.wakes.capacityChanged()
	return nil
}

// anyAbove reports whether a holds more of some resource than b (a missing
// resource is none).
func anyAbove(a, b vec) bool {
	for i := range max(len(a), len(b)) {
		if a.at(int32(i)) > b.at(int32(i)) {
			return true
		}
	}
	return false
}

// DeleteNode forgets a node. Reservations on it stay with their workloads (the
// pods there are gone; the workloads are typically evicted by the caller).
func (e *Engine) DeleteNode(name string) {
	tn, ok := e.topo.nodes[name]
	if !ok {
		return
	}
	e.topo.unlinkNode(tn)
	tn.flavors, tn.free, tn.alloc = nil, nil, nil
	if tn.reserved.isZero() {
		delete(e.topo.nodes, name)
	}
	e.wakes.capacityChanged()
}

// takesAPodOf reports whether node n has room for one pod of some pod set
// of w that may run there, placed on one of the node's flavors.
func (topo *topology) takesAPodOf(w *wl, n *topoNode) bool {
	for _, f := range n.flavors {
		tf := topo.flavorTopo[f]
		for i := range w.podSets {
			ps := &w.podSets[i]
			if ps.admitsNode(tf, n) && podsThatFit(n.free, n.reserved, ps.req, nil, 1) > 0 {
				return true
			}
		}
	}
	return false
}

// domainsOf lists the distinct domains (label values of levels 0..l) of the
// flavor's nodes — and pools, withPools — in sorted order. Capacity missing a
// level label is in none. Level -1 is one domain: everything.
func domainsOf(tf *topoFlavor, l int, withPools bool) [][]string {
	if l < 0 {
		return [][]string{{}}
	}
	idx := tf.indexed()
	cached := idx.domains[l]
	which := 0
	if withPools {
		which = 1
	}
	if cached[which] != nil {
		return cached[which]
	}
	out := [][]string{}
	seen := map[string]bool{}
	add := func(labels map[string]string) {
		key, ok := domainKey(tf, labels, l)
		if k := strings.Join(key, "\x00"); ok && !seen[k] {
			seen[k] = true
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
	cached[which] = out
	idx.domains[l] = cached
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

// capacityOf interns and validates an amount of capacity per resource.
func (nm *names) capacityOf(rs Resources) (vec, error) {
	out := make(vec, 0, len(nm.resources)+len(rs))
	for r, q := range rs {
		if r == "" || q < 0 || q > MaxAmount {
			return nil, fmt.Errorf("%s=%d: must be between 0 and %d", r, q, MaxAmount)
		}
		out.add(nm.resID(r), q)
	}
	return out, nil
}

// insertByName inserts x into s, kept sorted by name.
func insertByName[T any](s []T, x T, name func(T) string) []T {
	i, _ := slices.BinarySearchFunc(s, name(x), func(y T, n string) int { return strings.Compare(name(y), n) })
	return slices.Insert(s, i, x)
}
