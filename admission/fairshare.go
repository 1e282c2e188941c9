package admission

// fairSharing orders the ClusterQueues that have pending work: by weighted
// dominant resource share when Options.FairSharing is on (the least served
// first), round robin by last admission otherwise; and, within a
// ClusterQueue, LocalQueues by start-time fair queueing (lqfair.go). The
// order is kept in a tenant index; beside it, the queues with work of their
// own (own) and each cohort's members in the same order with their wake
// needs, from which a running cycle takes what to serve (wakeorder.go,
// cyclework.go), queues re-keyed while it runs in their new place.
// Fair-share preemption's rule lives with preemption (preempt.go) and asks
// the same shares.
type fairSharing struct {
	opts *Options
	// tenants holds every ClusterQueue state that has pending workloads, in
	// fair-share order.
	tenants tenantIndex
	// work is the running cycle's copy-on-write clone of tenants (nil between
	// cycles) under Options.wakeWholeCohort, the rule before wakeorder.go.
	work *tenantIndex

	// own holds the tenants with work of their own, releasedCohorts the
	// cohorts where quota was released since the last cycle, and stale the
	// queues whose wake need is to be recomputed (wakeorder.go). cw is the
	// running cycle's work (nil between cycles), kept in cwBuf.
	own             tenantIndex
	releasedCohorts []*cohortState
	stale           []*cqState
	cw              *cycleWork
	cwBuf           cycleWork
	order           *queueOrder
}

// inCycle reports whether a cycle is running.
func (fair *fairSharing) inCycle() bool { return fair.work != nil || fair.cw != nil }

// rekey refreshes the queue's fair-share key in the tenant index (and in the running
// cycle's working copy), and removes queues without pending work from the index.
//
// Most calls change nothing — a workload that failed to fit and preempted
// nothing leaves its queue's usage, head and last admission as they were —
// so a key that is unchanged for a queue already in the index is left in
// place: one lookup instead of a removal and an insertion in both trees.
func (fair *fairSharing) rekey(c *cqState) {
	k := fair.tenantKeyOf(c)
	if k == c.tkey && c.pending.len() > 0 && fair.tenants.has(c) {
		return
	}
	inWork := fair.work != nil && fair.work.remove(c)
	was := fair.tenants.remove(c)
	if fair.opts.wakeWholeCohort {
		c.tkey = k
		if c.pending.len() > 0 {
			fair.tenants.insert(c)
			if inWork {
				fair.work.insert(c)
			}
		}
		return
	}
	fair.rekeyWoken(c, k, was)
}

// rekeyWoken moves c to key k in the tenant index, own, its cohort's wake
// order and the running cycle's work (was: it was in the tenant index).
func (fair *fairSharing) rekeyWoken(c *cqState, k tenantKey, was bool) {
	old := c.tkey
	if c.inOwn {
		fair.own.remove(c)
	}
	now := c.pending.len() > 0
	if was && !now && c.cohort != nil {
		c.cohort.orderDrop(old)
	}
	c.tkey = k
	if now {
		fair.tenants.insert(c)
		if c.inOwn {
			fair.own.insert(c)
		}
		if co := c.cohort; co != nil {
			if was {
				co.orderMove(c, old)
			} else {
				co.orderAdd(c)
			}
			fair.markNeed(c)
		}
	} else {
		c.inOwn = false
	}
	if fair.cw != nil {
		fair.cw.rekeyed(c, old, !was, !now)
	}
	if now && !c.inOwn && hasOwnWork(c) {
		fair.markOwn(c)
	}
}

// tenantKeyOf computes the queue's fair-share key. With fair sharing, the share is
// the one the queue would have after admitting its head (like Kueue), estimated with
// the head charged to the first flavor of each resource group open to it
// (flavormatch.go): a queue within its nominal quota sorts first, and a weight-0
// queue that would borrow sorts last.
func (fair *fairSharing) tenantKeyOf(c *cqState) tenantKey {
	k := tenantKey{lastAdmit: c.lastAdmit, name: c.name}
	if !fair.opts.FairSharing || c.spec == nil {
		return k
	}
	head, ok := c.pending.min()
	if !ok {
		return k
	}
	var buf [8]frAmt
	extra := buf[:0]
	for _, r := range head.req {
		if gi, ok := c.resGroup[r.res]; ok {
			extra = append(extra, frAmt{fr: makeFR(c.firstOpen(head, gi).id, r.res), amt: r.amt})
		}
	}
	k.drs = c.drsWith(extra)
	return k
}

// anyWork reports whether some queue has something to examine: O(tenants)
// under the old rule, O(released cohorts) otherwise; no allocation.
func (fair *fairSharing) anyWork() bool {
	if !fair.opts.wakeWholeCohort {
		return fair.own.t.Len() > 0 || fair.anyWoken()
	}
	found := false
	fair.tenants.ascend(func(c *cqState) bool {
		found = c.refresh != refreshNone || c.fresh.len() > 0 || c.parkedLive
		return !found
	})
	return found
}

func (fair *fairSharing) standing(c *cqState) FairShare {
	fs := FairShare{}
	if c.spec != nil {
		fs.Weight = c.spec.FairShareWeight
		fs.DominantResourceShare = c.drs()
	}
	if c.cohort != nil {
		fs.Cohort = c.cohort.name
	}
	fair.tenants.ascend(func(t *cqState) bool {
		if t == c {
			return false
		}
		fs.TenantsAhead++
		return true
	})
	return fs
}

func (fair *fairSharing) touchCohort(co *cohortState, level refreshLevel) {
	if co == nil {
		return
	}
	if level == refreshCapacity && !fair.opts.wakeWholeCohort {
		// A release wakes the cohort, not each member: the next cycle
		// serves the members it can help (wakeorder.go).
		fair.release(co)
		return
	}
	for _, m := range co.members {
		m.refresh = max(m.refresh, level)
		// Released capacity changes no member's key (a share is usage
		// over the cohort's lendable quota, which a release leaves as it
		// is): only the releasing queue is re-keyed, by its caller.
		if level == refreshAll || fair.opts.wakeWholeCohort {
			fair.rekey(m)
		}
		fair.markOwn(m)
	}
}

// touchQueueAndCohort raises the refresh level of the queue (and of its cohort's
// members) and refreshes their fair-share keys.
func (fair *fairSharing) touchQueueAndCohort(c *cqState, level refreshLevel) {
	if c.cohort != nil {
		fair.touchCohort(c.cohort, level)
		fair.rekey(c)
		return
	}
	c.refresh = max(c.refresh, level)
	fair.rekey(c)
	fair.markOwn(c)
}

// tag gives a newly queued workload its start tag in ClusterQueue c and advances
// its LocalQueue's finish tag.
func (fair *fairSharing) tag(c *cqState, w *wl) {
	w.tagged = true
	if !fair.opts.LocalQueueFairSharing {
		w.vstart = 0
		return
	}
	k := lqKey{w.key.Namespace, w.lq}
	w.vstart = max(c.vtime, c.lqFinish[k])
	weight := w.lqWeight
	if weight == 0 {
		weight = defaultLQWeight
	}
	cost := max(c.share(w)*defaultLQWeight/weight, 1)
	if c.lqFinish == nil {
		c.lqFinish = map[lqKey]int64{}
	}
	c.lqFinish[k] = w.vstart + cost
}

// shareAfterAdmit is c's weighted dominant resource share once w's group gi requests
// are charged to flavor f.
func shareAfterAdmit(c *cqState, w *wl, gi int, f int32) int64 {
	var buf [8]frAmt
	extra := buf[:0]
	for _, r := range w.req {
		if c.resGroup[r.res] == gi {
			extra = append(extra, frAmt{fr: makeFR(f, r.res), amt: r.amt})
		}
	}
	return c.drsWith(extra)
}
