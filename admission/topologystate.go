package admission

import (
	"slices"
	"strings"
)

// topology is the engine's capacity model and placement in it: each flavor's
// levels, nodes and pools, every node's free and reserved capacity, and the
// workloads waiting for capacity in a domain. It decides where a gang fits
// (placement.go) and keeps what admissions reserved (topology.go); queueing
// work that capacity changes cause (waking waiting workloads) stays with the
// Engine, which sequences it.
type topology struct {
	names *names

	flavorTopo  map[string]*topoFlavor
	nodes       map[string]*topoNode
	pools       map[string]*topoPool
	topoWaiting []*wl
	// freed says a reservation was returned outside capacityChanged.
	freed bool
}

func newTopology(nm *names) *topology {
	return &topology{names: nm, flavorTopo: map[string]*topoFlavor{}, nodes: map[string]*topoNode{}, pools: map[string]*topoPool{}}
}

// capacityMoved keeps the domain sums of n's flavors right after n's free
// or reserved capacity changed from what before was left on it.
func (topo *topology) capacityMoved(n *topoNode, before vec) {
	after := n.leftVec()
	if before.equal(after) {
		return
	}
	for _, f := range n.flavors {
		tf := topo.flavorTopo[f]
		if tf == nil || tf.index == nil || len(tf.index.left) == 0 {
			continue
		}
		for l := range tf.levels {
			key, ok := domainKey(tf, n.labels, l)
			if !ok {
				break
			}
			k := strings.Join(key, "\x00")
			if sum, cached := tf.index.left[k]; cached {
				sum.addAll(before, -1)
				sum.addAll(after, 1)
				tf.index.left[k] = sum
			}
		}
	}
}

func (topo *topology) topoFlavorFor(name string) *topoFlavor {
	tf, ok := topo.flavorTopo[name]
	if !ok {
		tf = &topoFlavor{}
		topo.flavorTopo[name] = tf
	}
	return tf
}

func (topo *topology) unlinkNode(tn *topoNode) {
	for _, f := range tn.flavors {
		tf := topo.flavorTopo[f]
		tf.nodes = slices.DeleteFunc(tf.nodes, func(x *topoNode) bool { return x == tn })
		tf.invalidate()
	}
}

func (topo *topology) unlinkPool(tp *topoPool) {
	if tp.flavor == "" {
		return
	}
	tf := topo.flavorTopo[tp.flavor]
	tf.pools = slices.DeleteFunc(tf.pools, func(x *topoPool) bool { return x == tp })
	tf.invalidate()
}

// reserve charges a placement's shares to its nodes and its new nodes to its
// pools (sign 1), or returns them (-1). Whoever returns capacity tells the
// workloads waiting for it (capacityChanged).
func (topo *topology) reserve(p *placement, sign int64) {
	if p == nil {
		return
	}
	for _, s := range p.shares {
		n, ok := topo.nodes[s.node]
		if !ok {
			n = &topoNode{name: s.node}
			topo.nodes[s.node] = n
		}
		before := n.leftVec()
		for _, r := range s.amt {
			n.reserved.add(r.res, sign*r.amt)
		}
		topo.capacityMoved(n, before)
		if n.reserved.isZero() && n.free == nil {
			delete(topo.nodes, s.node) // deleted node whose last reservation went
		}
	}
	for name, k := range p.newNodes {
		pl, ok := topo.pools[name]
		if !ok {
			pl = &topoPool{name: name}
			topo.pools[name] = pl
		}
		pl.reserved += int32(sign) * k
		if pl.reserved == 0 && pl.flavor == "" {
			delete(topo.pools, name) // deleted pool whose last reservation went
		}
	}
}
