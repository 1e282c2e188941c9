package admission

// QueueUsage is what a ClusterQueue holds: how many workloads wait and how
// many hold quota, and the quota in use per flavor.
type QueueUsage struct {
	// Pending workloads waiting for admission.
	Pending int
	// Inadmissible of the Pending did not fit for lack of quota (they are
	// set aside until quota in the queue or its cohort is released) or are
	// Held.
	Inadmissible int
	// Held counts, by reason, the Pending that cannot be admitted as they
	// are whatever is released: held until their queue, flavor, nodes or
	// the workload change (see NeedsChange).
	Held map[PendingReason]int
	// DominantResourceShare is the queue's weighted share of what it
	// borrows, as FairShare has it (parts per billion divided by the
	// weight; 0 when it does not borrow).
	DominantResourceShare int64
	// Admitted workloads holding quota (including ones being evicted).
	Admitted int
	// Flavors in the ClusterQueue's order, each with its resources in the
	// group's order.
	Flavors []FlavorUsage
}

// FlavorUsage is the usage of one flavor of a ClusterQueue.
type FlavorUsage struct {
	// Flavor name.
	Flavor string
	// Resources of the flavor.
	Resources []ResourceUsage
}

// ResourceUsage is the usage of one resource in one flavor.
type ResourceUsage struct {
	// Name of the resource.
	Name ResourceName
	// Total in use, in milli-units: the quota reserved, by admitted
	// workloads, by those whose capacity is still being booked, and for
	// preemptors whose victims are still going (Kueue's reservation).
	Total int64
	// Borrowed is the part of Total above the nominal quota.
	Borrowed int64
	// Admitted is the part of Total held by workloads that may run:
	// admitted, and not waiting for the capacity they book (Kueue's
	// usage). A workload being evicted counts until it is gone: its pods
	// still hold the capacity.
	Admitted int64
}

// ClusterQueueUsage reports what the named ClusterQueue holds. It is false
// when the engine has no spec for the queue.
func (e *Engine) ClusterQueueUsage(name string) (QueueUsage, bool) {
	c, ok := e.queues.cqs[name]
	if !ok || c.spec == nil {
		return QueueUsage{}, false
	}
	out := QueueUsage{Pending: c.pending.len(), Admitted: c.admitted.len(), DominantResourceShare: c.drs()}
	c.pending.ascend(func(w *wl) bool {
		if w.parkRes >= 0 || w.reason.NeedsChange() {
			out.Inadmissible++
		}
		if w.reason.NeedsChange() {
			if out.Held == nil {
				out.Held = map[PendingReason]int{}
			}
			out.Held[w.reason]++
		}
		return true
	})
	admitted := e.books.admittedUsage(c)
	for _, g := range c.groups {
		for _, f := range g.flavors {
			fu := FlavorUsage{Flavor: f.name, Resources: make([]ResourceUsage, 0, len(g.resources))}
			for _, r := range g.resources {
				k := makeFR(f.id, r)
				u := c.usage[k]
				fu.Resources = append(fu.Resources, ResourceUsage{
					Name: e.names.resources[r], Total: u, Borrowed: max(0, u-c.quota[k].nominal), Admitted: admitted[k],
				})
			}
			out.Flavors = append(out.Flavors, fu)
		}
	}
	return out, true
}

// admittedUsage sums the usage of c's admitted workloads whose capacity is
// not being booked. The queue's usage cannot be split instead: it also
// holds the quota kept for preemptors, which no workload of c uses.
func (books *bookings) admittedUsage(c *cqState) map[frKey]int64 {
	out := map[frKey]int64{}
	c.admitted.ascend(func(w *wl) bool {
		if _, booking := books.booking[w]; booking {
			return true
		}
		for _, u := range w.usage {
			out[u.fr] += u.amt
		}
		return true
	})
	return out
}
