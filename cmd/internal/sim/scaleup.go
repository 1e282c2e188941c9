package sim

import (
	"math"
	"time"
)

// matchesLabels says whether n's labels satisfy p's node selector.
func (p *pod) matchesLabels(n *node) bool {
	for k, v := range p.selector {
		if n.labels[k] != v {
			return false
		}
	}
	return true
}

// matchesTemplate says whether a new node of g would take p, as
// cluster-autoscaler judges it from the group's template node: a group
// that spans racks is judged by the rack of its latest node (or its first
// rack), which is where the autoscaler believes a new node lands.
func (p *pod) matchesTemplate(g *group) bool {
	labels := g.templateLabels()
	if len(g.model.Racks) > 0 {
		labels[g.model.RackLabel] = g.model.Racks[max(0, g.nextRack-1)%len(g.model.Racks)]
	}
	for k, v := range p.selector {
		if labels[k] != v {
			return false
		}
	}
	if p.together == "" {
		return true
	}
	v, ok := labels[p.together]
	if !ok {
		return false
	}
	want, pinned := p.job.domain[p.together]
	return !pinned || want == v
}

// scaleUpForPods is the autoscaler's scale-up for unschedulable pods that
// consume no request: pods that fit nodes already being created wait for
// them; for the rest, each node group is an option holding the pods that
// fit its template, first-fit onto new nodes; the least-waste option is
// carried out — one per loop. It says whether to look again next loop.
func (a *autoscaler) scaleUpForPods(now time.Duration) bool {
	if !a.podsDirty {
		return false
	}
	a.podsDirty = false
	uncovered := a.uncoveredPods()
	if len(uncovered) == 0 {
		return false
	}
	var best *scaleOption
	for _, g := range a.c.groups {
		if g.backoffUntil > now || g.room() == 0 {
			continue
		}
		if o := optionFor(g, uncovered); o != nil && o.better(best) {
			best = o
		}
	}
	if best == nil {
		return false
	}
	a.podsDirty = true // the pods left may need another loop
	if best.g.stockedOut(now) {
		best.g.backoffUntil = now + groupBackoff
		a.q.at(best.g.backoffUntil, func(t time.Duration) { a.podsDirty = true; a.wake(t) })
		return true
	}
	for _, trigger := range best.triggers {
		a.createNode(best.g, now, trigger)
	}
	return true
}

// uncoveredPods are the pending pods that consume no request and fit no
// node being created, in order.
func (a *autoscaler) uncoveredPods() []*pod {
	type upcoming struct {
		n    *node
		free amounts
	}
	var booting []upcoming
	for _, n := range a.c.booting {
		if n.booked == "" {
			booting = append(booting, upcoming{n, n.free})
		}
	}
	var out []*pod
	for _, p := range a.c.pending {
		if p.booking != "" {
			continue
		}
		covered := false
		for i := range booting {
			if u := &booting[i]; u.free.fits(&p.requests) && p.matches(u.n) {
				u.free.add(&p.requests, -1)
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

// scaleOption is one node group's scale-up for some pending pods.
type scaleOption struct {
	g        *group
	pods     int
	waste    float64
	triggers []string // per new node, the job of the first pod placed on it
}

// optionFor places the pods that fit g's template first-fit onto new nodes
// of g, as many as its room allows; nil if none fits.
func optionFor(g *group, pods []*pod) *scaleOption {
	alloc := g.alloc
	var nodes []amounts
	o := &scaleOption{g: g}
	var used amounts
	for _, p := range pods {
		if !p.matchesTemplate(g) || !alloc.fits(&p.requests) {
			continue
		}
		placed := false
		for i := range nodes {
			if nodes[i].fits(&p.requests) {
				nodes[i].add(&p.requests, -1)
				placed = true
				break
			}
		}
		if !placed {
			if int32(len(nodes)) >= g.room() {
				continue
			}
			free := alloc
			free.add(&p.requests, -1)
			nodes = append(nodes, free)
			o.triggers = append(o.triggers, p.job.spec.ID)
		}
		used.add(&p.requests, 1)
		o.pods++
	}
	if o.pods == 0 {
		return nil
	}
	o.waste = optionWaste(&alloc, &used, len(nodes))
	return o
}

// optionWaste is the share of the new nodes' capacity the pods leave
// unused, averaged over the resources they use.
func optionWaste(alloc, used *amounts, nodes int) float64 {
	sum, k := 0.0, 0
	for r, v := range used {
		capacity := float64(alloc[r]) * float64(nodes)
		if capacity == 0 || v == 0 {
			continue
		}
		sum += 1 - float64(v)/capacity
		k++
	}
	if k == 0 {
		return math.Inf(1)
	}
	return sum / float64(k)
}

// better orders options: less waste, then more pods, then the group's name.
func (o *scaleOption) better(than *scaleOption) bool {
	switch {
	case than == nil:
		return true
	case o.waste != than.waste:
		return o.waste < than.waste
	case o.pods != than.pods:
		return o.pods > than.pods
	}
	return o.g.pool.Name < than.g.pool.Name
}
