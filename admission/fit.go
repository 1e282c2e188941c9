package admission

// outcome is the result of evaluating one pending workload against its queue.
type outcome struct {
	// reason is "" when the workload fits now with flavors.
	reason PendingReason
	// flavors has the chosen flavor index per resource group (-1: group not requested).
	flavors []int
	// group is the first resource group that does not fit (reason InsufficientQuota or
	// ExceedsMaxQuota), or the unsupported resource id (UnsupportedResource).
	group int
	// place is the topology placement of a workload that asked for one and fits;
	// msg the message of a topology reason.
	place *placement
	msg   string
	// flavor whose capacity a TopologyUnavailable workload waits for.
	flavor string
}

// evaluate decides whether w fits in c now. It has no side effects, so Explain can
// use it too.
//
// Flavor choice, per resource group (all pod sets of a workload get the same flavor
// for a group, so a gang lands on one kind of hardware): the first flavor, in the
// queue's order, where the whole workload fits without borrowing; else the first
// where it fits by borrowing; else the group does not fit. A topology gang that no
// domain of its flavor takes falls back to the group's next flavor whose quota
// fits, in the same order (see fallback.go).
func (e *Engine) evaluate(c *cqState, w, head *wl) outcome {
	if w.notBefore != 0 && e.books.backoffUntil(w) {
		return outcome{reason: ProvisioningBackoff, msg: msgBackoff(w.notBefore)}
	}
	if out, ok := e.pre.planned(c, w); ok {
		return out // a preemptor served once its victims are gone (preempt_topology.go)
	}
	out := outcome{flavors: flavorScratch(&e.scratch, len(c.groups))}
	for _, r := range w.req {
		gi, ok := c.resGroup[r.res]
		if !ok {
			return outcome{reason: UnsupportedResource, group: int(r.res)}
		}
		out.flavors[gi] = -2 // requested, undecided
	}
	for gi := range c.groups {
		if out.flavors[gi] != -1 && !c.anyOpen(w, gi) {
			out.reason, out.group = NoMatchingFlavor, gi // whatever quota frees, it waits
			return out
		}
	}
	for gi := range c.groups {
		if out.flavors[gi] == -1 {
			continue
		}
		fi := chooseFlavor(c, w, gi)
		if fi < 0 {
			out.reason, out.group = InsufficientQuota, gi
			if exceedsMax(c, w, gi) {
				out.reason = ExceedsMaxQuota
			}
			return out
		}
		out.flavors[gi] = fi
	}
	if w != head && head != nil && e.order.reserving(c, head) && sharesResource(w, head) {
		out.reason = ReservedForHead
		return out
	}
	if w.topo != nil || len(e.topo.flavorTopo) > 0 {
		out.place, out.reason, out.msg, out.flavor = e.topo.placeIn(c, w, out.flavors)
		if w.topo != nil && fallsBack(out.reason) {
			e.topo.fallBack(c, w, &out)
		}
	}
	return out
}

// flavorScratch returns *scratch resized to n entries set to -1. The result is valid
// until the next call; admit copies what it needs out of it.
func flavorScratch(scratch *[]int, n int) []int {
	if cap(*scratch) < n {
		*scratch = make([]int, n)
	}
	s := (*scratch)[:n]
	for i := range s {
		s[i] = -1
	}
	return s
}

// chooseFlavor returns the flavor index for group gi, or -1 if none fits.
func chooseFlavor(c *cqState, w *wl, gi int) int {
	borrowFlavor := -1
	for fi, f := range c.groups[gi].flavors {
		fits, borrows := c.fitsFlavor(w, gi, f.id)
		if !fits {
			continue
		}
		if !borrows {
			return fi
		}
		if borrowFlavor < 0 {
			borrowFlavor = fi
		}
	}
	return borrowFlavor
}

// fitsFlavor reports whether w's requests in group gi fit flavor f, and whether that
// needs borrowing. A flavor closed to w's pods (flavormatch.go) fits nothing.
func (c *cqState) fitsFlavor(w *wl, gi int, f int32) (fits, borrows bool) {
	if !c.opens(w, gi, f) {
		return false, false
	}
	for _, r := range w.req {
		if c.resGroup[r.res] != gi {
			continue
		}
		k := makeFR(f, r.res)
		if r.amt > c.available(k) {
			return false, false
		}
		if c.usage[k]+r.amt > c.quota[k].nominal {
			borrows = true
		}
	}
	return true, borrows
}

// exceedsMax reports whether w's requests in group gi exceed, in every flavor open
// to it, what the queue could ever get (everything it may use free).
func exceedsMax(c *cqState, w *wl, gi int) bool {
	for _, f := range c.groups[gi].flavors {
		if withinMax(c, w, gi, f.id) {
			return false
		}
	}
	return true
}

// sharesResource reports whether a and b request a common resource.
func sharesResource(a, b *wl) bool {
	i, j := 0, 0
	for i < len(a.req) && j < len(b.req) {
		switch {
		case a.req[i].res == b.req[j].res:
			return true
		case a.req[i].res < b.req[j].res:
			i++
		default:
			j++
		}
	}
	return false
}

// shortfalls lists, for group gi, every flavor and resource where w does not fit now.
func (nm *names) shortfalls(c *cqState, w *wl, gi int) []Shortfall {
	var out []Shortfall
	for _, f := range c.groups[gi].flavors {
		if !f.openTo(c, w, gi) {
			continue
		}
		for _, r := range w.req {
			if c.resGroup[r.res] != gi {
				continue
			}
			k := makeFR(f.id, r.res)
			if a := c.available(k); r.amt > a {
				out = append(out, Shortfall{Flavor: f.name, Resource: nm.resources[r.res], Requested: r.amt, Available: a})
			}
		}
	}
	return out
}
