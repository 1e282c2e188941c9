package sim

import (
	"time"

	"github.com/berth-dev/berth/cmd/internal/autoscale"
)

// matchesLabels says whether n's labels satisfy p's node selector, and
// its taints let p on.
func (p *pod) matchesLabels(n *node) bool {
	if !p.tolerates(n.taints) {
		return false
	}
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
	if !p.tolerates(g.pool.Spec.NodeTemplate.Taints) {
		return false
	}
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
// fit its template, first-fit onto new nodes (the shared estimator, not
// all or nothing); the expander's choice is carried out — one per loop. It
// says whether to look again next loop.
func (a *autoscaler) scaleUpForPods(now time.Duration) bool {
	if !a.podsDirty {
		return false
	}
	a.podsDirty = false
	uncovered := a.uncoveredPods()
	if len(uncovered) == 0 {
		return false
	}
	var options []autoscale.Option
	var scaleUps []*scaleOption
	for _, g := range a.c.groups {
		if g.backoffUntil > now || g.room() == 0 {
			continue
		}
		if o := a.optionFor(g, uncovered, now); o != nil {
			options, scaleUps = append(options, o.option), append(scaleUps, o)
		}
	}
	best := autoscale.Best(options)
	if best < 0 {
		return false
	}
	a.podsDirty = true // the pods left may need another loop
	chosen := scaleUps[best]
	if chosen.option.OutOfStock {
		chosen.g.backoffUntil = now + autoscale.NodeGroupBackoff
		a.q.at(chosen.g.backoffUntil, func(t time.Duration) { a.podsDirty = true; a.wake(t) })
		return true
	}
	for _, trigger := range chosen.triggers {
		a.createNode(chosen.g, now, trigger)
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
	option   autoscale.Option
	triggers []string // per new node, the job of the first pod placed on it
}

// optionFor places the pods that fit g's template first-fit onto new nodes
// of g, as many as its room allows; nil if none fits.
func (a *autoscaler) optionFor(g *group, pods []*pod, now time.Duration) *scaleOption {
	var fit []*pod
	var reqs []*amounts
	for _, p := range pods {
		if p.matchesTemplate(g) {
			fit, reqs = append(fit, p), append(reqs, &p.requests)
		}
	}
	nodes, at, _ := autoscale.Estimate(reqs, a.opener(g), (*slot).take, false)
	if len(nodes) == 0 {
		return nil
	}
	o := &scaleOption{g: g, triggers: make([]string, len(nodes))}
	var placed []*amounts
	for i, n := range at {
		if n < 0 {
			continue
		}
		placed = append(placed, reqs[i])
		if o.triggers[n] == "" {
			o.triggers[n] = fit[i].job.spec.ID
		}
	}
	o.option = a.optionOf(g, len(nodes), placed, now)
	return o
}
