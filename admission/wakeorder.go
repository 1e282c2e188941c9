package admission

import (
	"cmp"
	"slices"
	"strings"
)

// A release of quota in a cohort used to wake every member, and a cycle took
// every queue with pending work in fair-share order to find the few that had
// something to do: at 1e5 pending workloads in 1,000 queues, about 930 of
// every 1,000 queues a cycle took did nothing, and reading each one's state
// from memory was 40-57 % of the cycle (docs/performance.md, "Where a
// cycle's time goes"). The engine now keeps, beside the tenant index:
//
//   - the queues with work of their own (a refresh level, fresh workloads)
//     in a second index, own, kept as they get it;
//   - per cohort, its members with pending work in fair-share order, each
//     entry carrying its key and the least request serving it after a
//     release could admit (its wake need), so that a cycle can step over a
//     member a release cannot help without reading the member;
//   - the cohorts where quota was released since the last cycle.
//
// A cycle serves, in fair-share order, the union of the queues in own and,
// of each released cohort, the members whose wake need is within what the
// cohort could give them. A queue it never takes is one the old cycle would
// have taken and left with nothing done, so the decisions are the same: the
// fuzz targets' twins run the old cycle (Options.wakeWholeCohort) and
// require every result to be equal, and the invariant check recomputes every
// wake need that is not marked for recomputation.

// wakeAny and wakeNever are memberEntry.res values that name no resource.
const (
	// wakeAny: the member is served whenever its cohort releases.
	wakeAny int32 = -1
	// wakeNever: no release can let the member admit anything.
	wakeNever int32 = -2
)

// memberEntry is a cohort member with pending work in its cohort's wake
// order.
type memberEntry struct {
	key tenantKey
	c   *cqState
	// need is a lower bound of every request of resource res that serving
	// c, woken only by a release, could admit.
	need int64
	res  int32
}

func cmpTenantKey(a, b tenantKey) int {
	if c := cmp.Compare(a.drs, b.drs); c != 0 {
		return c
	}
	if c := cmp.Compare(a.lastAdmit, b.lastAdmit); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// orderIndex finds key k in the cohort's wake order.
func (co *cohortState) orderIndex(k tenantKey) (int, bool) {
	return slices.BinarySearchFunc(co.order, k, func(e memberEntry, k tenantKey) int { return cmpTenantKey(e.key, k) })
}

// orderAdd enters c under its current key, its wake need to be computed.
func (co *cohortState) orderAdd(c *cqState) {
	i, _ := co.orderIndex(c.tkey)
	co.order = slices.Insert(co.order, i, memberEntry{key: c.tkey, c: c, res: wakeAny})
}

// orderMove moves the entry under key old to c's current key, shifting only
// the entries between the two places.
func (co *cohortState) orderMove(c *cqState, old tenantKey) {
	i, ok := co.orderIndex(old)
	if !ok {
		co.orderAdd(c)
		return
	}
	e := co.order[i]
	e.key = c.tkey
	j, _ := co.orderIndex(c.tkey) // where it goes among the others
	if j > i {
		j-- // the entry itself leaves its place first
		copy(co.order[i:j], co.order[i+1:j+1])
	} else {
		copy(co.order[j+1:i+1], co.order[j:i])
	}
	co.order[j] = e
}

// orderDrop removes the entry under key k.
func (co *cohortState) orderDrop(k tenantKey) {
	if i, ok := co.orderIndex(k); ok {
		co.order = slices.Delete(co.order, i, i+1)
	}
}

// wakeNeed is what serving c after a release could at least take: a
// StrictFIFO queue only its head (when parked); a BestEffortFIFO queue the
// smallest parked request, or only its head while the head reserves by
// skips and everything parks under the head's resource (parkedNext leaves
// the rest parked). wakeAny when that is not known from one resource.
func (order *queueOrder) wakeNeed(c *cqState) (int32, int64) {
	head, ok := c.pending.min()
	if !ok || c.spec == nil || c.spec.held() {
		return wakeAny, 0
	}
	if c.strict() {
		if head.parkRes < 0 {
			return wakeAny, 0
		}
		return head.parkRes, head.parkAmt
	}
	if len(c.parked) == 0 {
		return wakeNever, 0
	}
	if len(c.parked) > 1 {
		return wakeAny, 0
	}
	for r, t := range c.parked {
		if head.parkRes == r && order.reservesBySkips(head) {
			return r, head.parkAmt
		}
		first, _ := t.Min()
		return r, first.low
	}
	return wakeAny, 0
}

// reservesBySkips reports whether a BestEffortFIFO head reserves for a
// reason that lasts while it is the head: skips only grow, and its reason
// changes only when it is evaluated, when its queue is served.
func (order *queueOrder) reservesBySkips(head *wl) bool {
	return (head.reason == InsufficientQuota || head.reason == WaitingForPreemption) &&
		int(head.skips) >= order.opts.StarvationSkips
}

// canHelp reports whether a release in the cohort could let the member of
// entry e admit something with what the cohort has free now: the most any
// member can get of a resource is what is free of it in some flavor plus
// the largest guarantee a member has there.
func (co *cohortState) canHelp(e *memberEntry) bool {
	switch e.res {
	case wakeAny:
		return true
	case wakeNever:
		return false
	}
	for _, ck := range co.keys[e.res] {
		if max(0, co.pool[ck.k]-co.used[ck.k])+ck.guarantee >= e.need {
			return true
		}
	}
	return false
}

// markNeed records that c's wake need may have changed.
// It is recomputed when the next cycle begins: within a cycle only a queue
// the cycle has taken, or is done with, has its need changed, and a cursor
// steps over those whatever their need.
func (fair *fairSharing) markNeed(c *cqState) {
	if fair.opts.wakeWholeCohort || c.cohort == nil {
		return
	}
	if !c.needStale {
		c.needStale = true
		fair.stale = append(fair.stale, c)
	}
}

// refreshNeeds recomputes the wake needs marked stale.
func (fair *fairSharing) refreshNeeds() {
	for _, c := range fair.stale {
		c.needStale = false
		fair.setNeed(c)
	}
	clear(fair.stale)
	fair.stale = fair.stale[:0]
}

// setNeed recomputes c's wake need in its cohort's order.
func (fair *fairSharing) setNeed(c *cqState) {
	if c.cohort == nil || c.pending.len() == 0 {
		return
	}
	if i, ok := c.cohort.orderIndex(c.tkey); ok {
		e := &c.cohort.order[i]
		e.res, e.need = fair.order.wakeNeed(c)
	}
}

// markOwn records that c has work of its own. Between cycles it joins own;
// in a cycle it is taken in this one if the old cycle would still have
// taken it (it has not been taken yet and its key is not behind the
// cycle's), else it waits in own for the next.
func (fair *fairSharing) markOwn(c *cqState) {
	if fair.opts.wakeWholeCohort || c.pending.len() == 0 {
		return
	}
	if cw := fair.cw; cw != nil {
		if c.cycMark == cw.mark {
			return // in this cycle's heap already
		}
		if c.cycMark != cw.mark+1 && !cw.passed(c.tkey) {
			cw.take(c)
			return
		}
	}
	if !c.inOwn {
		c.inOwn = true
		fair.own.insert(c)
	}
}

// hasOwnWork reports whether c has work of its own.
func hasOwnWork(c *cqState) bool { return c.refresh != refreshNone || c.fresh.len() > 0 }

// release records that quota was released in the cohort.
func (fair *fairSharing) release(co *cohortState) {
	if cw := fair.cw; cw != nil {
		fair.wakeInCycle(co)
	}
	if co.released {
		return
	}
	co.released = true
	fair.releasedCohorts = append(fair.releasedCohorts, co)
	if cw := fair.cw; cw != nil && cw.cursors {
		cw.cursor(co, cw.last, !cw.took)
	}
}

// wakeInCycle wakes, for a release while a cycle runs (a preemptor's held
// quota freed as it is served), the members the old rule's per-member wake
// reached that a cursor would not: one taken already is woken for this
// cycle; one done, or one the cycle has passed, for the next.
func (fair *fairSharing) wakeInCycle(co *cohortState) {
	cw := fair.cw
	for i := range co.order {
		c := co.order[i].c
		switch {
		case c.cycMark == cw.mark:
			c.refresh = max(c.refresh, refreshCapacity)
		case c.cycMark == cw.mark+1 || cw.passed(c.tkey):
			c.refresh = max(c.refresh, refreshCapacity)
			fair.markOwn(c)
		}
	}
}

// anyWoken reports whether some released cohort has a member with pending
// work.
func (fair *fairSharing) anyWoken() bool {
	for _, co := range fair.releasedCohorts {
		if len(co.order) > 0 {
			return true
		}
	}
	return false
}
