package admission

import (
	"slices"
	"time"
)

// Cycle admits every pending workload that fits, in order, and may propose
// preemptions. now is the only time input (used for admission times and the
// anti-starvation age rule).
//
// Order: ClusterQueues are served from the tenant index (lowest weighted dominant
// resource share first with fair sharing; round robin otherwise), one admission at a
// time, re-keying the served queue after each admission; inside a queue, workloads
// are taken in queue order. A queue leaves the cycle when nothing more of it fits.
// Within one cycle capacity only shrinks (nothing is released), so a queue that has
// nothing fitting cannot get something fitting later in the same cycle.
//
// Cost: only queues with fresh work (a new or changed workload, released capacity in
// the queue or its cohort, a quota change) are examined, and only their fresh
// workloads; a member of a cohort woken only by a release is taken only if the
// release could help it (wakeorder.go), and passed over when its cohort has too
// little free for anything its members park (cohortwake.go); a cycle in which
// nothing changed and nothing fits costs O(released cohorts).
func (e *Engine) Cycle(now time.Time) Result {
	e.clock.cycle++
	e.clock.now = now.UnixNano()
	var res Result
	e.books.decideBookings(&res)
	e.evict.decide(&res)
	e.elig.report(&res)
	if e.topo.freed {
		e.wakes.capacityChanged()
	}
	if len(e.books.backoffs) > 0 {
		e.books.wakeBackoffs()
	}
	if len(e.pre.ready) == 0 && !e.fair.anyWork() {
		return res // nothing changed since the last cycle: nothing can fit
	}
	if e.opts.wakeWholeCohort {
		e.cycleAll(&res)
	} else {
		e.cycleWoken(&res)
	}
	e.endCycle()
	return res
}

// cycleWoken serves, in fair-share order, the queues with work of their
// own and the members of released cohorts that the release could help
// (wakeorder.go, cyclework.go).
func (e *Engine) cycleWoken(res *Result) {
	fair := e.fair
	cw := &fair.cwBuf
	cw.items, cw.took, cw.cursors, cw.passedOver = cw.items[:0], false, false, &e.passedOver
	cw.mark += 2
	fair.cw = cw
	fair.own.ascend(func(c *cqState) bool {
		c.inOwn = false
		cw.take(c)
		return true
	})
	fair.own.t.Clear(false)
	e.serveReady(res)
	// Workloads behind a preemptor served just now may preempt in this
	// cycle: before the victims queued again take the quota it left.
	e.pre.wakeBehind()
	fair.refreshNeeds()
	for _, co := range fair.releasedCohorts {
		cw.cursor(co, tenantKey{}, true)
	}
	cw.cursors = true
	for {
		c, ok := cw.next()
		if !ok {
			break
		}
		switch {
		case c.refresh == refreshNone && c.fresh.len() == 0 && !c.parkedLive:
			cw.done(c)
			continue
		case e.spentWake(c):
			e.passedOver++
			c.refresh = refreshNone
			cw.done(c)
			continue
		case e.serve(c, res):
			cw.keep(c)
		default:
			cw.done(c)
		}
		// Serving may have changed what the queue parks, its head and
		// the head's reason or skips.
		fair.markNeed(c)
	}
	for _, co := range fair.releasedCohorts {
		co.released = false
	}
	clear(fair.releasedCohorts)
	fair.releasedCohorts = fair.releasedCohorts[:0]
	fair.cw = nil
}

// cycleAll is the cycle under Options.wakeWholeCohort: every queue with
// pending work is taken in fair-share order, every member a release woke
// is served.
func (e *Engine) cycleAll(res *Result) {
	work := e.fair.tenants.clone()
	e.fair.work = &work
	e.serveReady(res)
	e.pre.wakeBehind()
	for {
		c, ok := work.min()
		if !ok {
			break
		}
		if c.refresh == refreshNone && c.fresh.len() == 0 && !c.parkedLive {
			work.remove(c)
			continue
		}
		if e.spentWake(c) {
			e.passedOver++
			c.refresh = refreshNone
			work.remove(c)
			continue
		}
		if !e.serve(c, res) {
			work.remove(c)
		}
	}
	e.fair.work = nil
}

// endCycle applies what the cycle deferred so that no workload is evaluated twice
// and capacity only shrinks while it runs: reservations lifted, parked workloads
// filed, held quota of admitted preemptors freed.
func (e *Engine) endCycle() {
	for _, c := range e.order.deferred {
		e.order.liftReservation(c)
	}
	e.order.deferred = e.order.deferred[:0]
	for _, c := range e.order.live {
		c.parkedLive = false
	}
	e.order.live = e.order.live[:0]
	for _, w := range e.order.toPark {
		if w.phase == phasePending && w.reason == InsufficientQuota && len(w.victims) == 0 {
			e.order.park(e.queues.cqs[w.cqName], w)
		}
	}
	e.order.toPark = e.order.toPark[:0]
	for _, w := range e.order.freshLater {
		if w.phase == phasePending {
			e.order.makeFresh(e.queues.cqs[w.cqName], w)
		}
	}
	e.order.freshLater = e.order.freshLater[:0]
	for _, g := range e.deferredGhosts {
		c := e.queues.cqs[g.cq]
		c.charge(g.usage, -1)
		e.fair.touchQueueAndCohort(c, refreshCapacity)
		e.queues.maybeDropCQ(c)
	}
	e.deferredGhosts = e.deferredGhosts[:0]
	e.pre.endCycle()
}

// serveReady evaluates, before anything else, preemptors whose victims are all gone,
// so that they get the quota the preemption freed (held for them until then).
func (e *Engine) serveReady(res *Result) {
	if len(e.pre.ready) == 0 {
		return
	}
	var ws []*wl
	for _, k := range e.pre.ready {
		if w, ok := e.workloads[k]; ok && w.phase == phasePending && !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	e.pre.ready = e.pre.ready[:0]
	slices.SortFunc(ws, func(a, b *wl) int {
		if lessPending(a, b) {
			return -1
		}
		return 1
	})
	for _, w := range e.pre.withRiders(ws) {
		c := e.queues.cqs[w.cqName]
		head, _ := c.pending.min()
		// What was held for it is released now, when it is served, and not
		// when its last victim went: a preemptor served before it cannot take
		// it either.
		e.pre.releaseGhosts(w)
		e.fair.markNeed(c)
		if c.spec == nil || c.spec.held() {
			w.hold = nil
			continue
		}
		// Neither StrictFIFO's head nor a head reservation applies: the quota
		// was freed (and held) for this workload by its own preemptions, made
		// while it was the head. Its victims, queued again, may now come first
		// in LocalQueue fair order; served as head, a victim would take the
		// quota back and the preemptor preempt again, round after round (found
		// by the decisions check, corpus entry preemption-ping-pong). Likewise a
		// head reservation that began after the preemption would hand the quota
		// to another queue and the preemptor would preempt again (found by
		// FuzzConvergence).
		if out := e.evaluate(c, w, nil); out.reason == "" {
			c.fresh.remove(w)
			e.order.unpark(c, w)
			w.evalCycle = e.clock.cycle
			e.admit(c, w, head, out, res)
		} else if w == head && c.reserved.len() > 0 {
			// It reserved for its victims and has none left: what it
			// blocked is free to go (it reserves again if it starves).
			e.order.liftReservation(c)
		}
		w.hold = nil // its domain counted for this evaluation only
	}
}

// serve examines the queue's fresh workloads in order until one is admitted (true) or
// none is left (false).
func (e *Engine) serve(c *cqState, res *Result) bool {
	e.order.refresh(c)
	if c.spec == nil || c.spec.held() {
		e.order.holdAll(c, res)
		return false
	}
	for {
		w, _ := c.fresh.min()
		parked := false
		if c.parkedLive {
			if p := e.order.parkedNext(c); p != nil && (w == nil || lessPending(p, w)) {
				w, parked = p, true
			}
		}
		if w == nil {
			return false
		}
		head, _ := c.pending.min()
		if c.strict() && w != head {
			if parked {
				e.order.makeFresh(c, w) // reported with the rest
			}
			e.order.blockBehind(c, head, res)
			return false
		}
		if !parked {
			// A parked candidate is taken straight from the parked
			// index, never through the fresh set.
			c.fresh.remove(w)
		}
		e.order.unpark(c, w)
		if w.evalCycle == e.clock.cycle {
			// Evaluated earlier in this cycle; capacity only shrank since. Look at it
			// again next cycle.
			e.order.freshLater = append(e.order.freshLater, w)
			continue
		}
		w.evalCycle = e.clock.cycle
		e.evaluations++
		out := e.evaluate(c, w, head)
		if out.reason == "" {
			e.admit(c, w, head, out, res)
			return true
		}
		e.settle(c, w, out, res)
		e.topo.markBooking(w, out, res)
		if c.strict() {
			e.order.blockBehind(c, w, res)
			return false
		}
	}
}

// holdAll reports every fresh workload of a missing or stopped queue.
func (order *queueOrder) holdAll(c *cqState, res *Result) {
	reason, msg := heldBecause(c)
	c.fresh.ascend(func(w *wl) bool {
		report(w, reason, msg, res)
		return true
	})
	c.fresh.t.Clear(false)
}

// blockBehind reports every fresh workload behind a StrictFIFO head that does not fit.
func (order *queueOrder) blockBehind(c *cqState, head *wl, res *Result) {
	msg := msgBlocked(c.name, head.key)
	c.fresh.ascend(func(w *wl) bool {
		if w != head {
			report(w, BlockedByHead, msg, res, head.key)
		}
		return true
	})
	c.fresh.t.Clear(false)
}

// report records a pending status and emits it only if it changed, with
// the other workloads msg names (mentions, copied).
func report(w *wl, reason PendingReason, msg string, res *Result, mentions ...WorkloadKey) {
	h := hashMessage(msg)
	if w.reason == reason && w.msgHash == h {
		return
	}
	w.reason, w.msgHash = reason, h
	if res != nil {
		res.Pending = append(res.Pending, PendingUpdate{Key: w.key, Reason: reason, Message: msg, Mentions: slices.Clone(mentions)})
	}
}

// hashMessage is 64-bit FNV-1a, without allocation.
func hashMessage(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// admit assumes the admission of w with the flavors chosen in out.
func (e *Engine) admit(c *cqState, w, head *wl, out outcome, res *Result) {
	c.pending.remove(w)
	if w == head {
		e.order.headLeft(c, w)
	} else {
		e.order.noteSkip(c, head)
	}
	w.adm, w.usage = e.names.buildAdmission(c, w, out.flavors)
	if p := out.place; p != nil {
		if len(p.assign.Domain) > 0 {
			a := p.assign
			a.Domain, a.Levels = slices.Clone(a.Domain), slices.Clone(a.Levels)
			w.adm.Topology = &a
		}
		w.adm.Provisioning = e.books.bookingPlan(w, p.flavor, p)
		if w.adm.Provisioning != nil {
			e.books.booking[w] = struct{}{}
		}
		if len(p.shares) > 0 || len(p.newNodes) > 0 {
			w.placed = p
			e.topo.reserve(w.placed, 1)
		}
	}
	w.adm.Generation = w.gen
	w.phase, w.admCQ, w.admitTime = phaseAssumed, c.name, e.clock.now
	w.victims, w.preempted = nil, false
	e.pre.forgetRide(w)
	if len(w.ghosts) > 0 {
		e.deferredGhosts = append(e.deferredGhosts, w.ghosts...)
		w.ghosts = nil
	}
	e.pre.dropHold(w)
	e.seq++
	w.admitSeq, w.prevLast, c.lastAdmit = e.seq, c.lastAdmit, e.seq
	c.noteAdmitted(w)
	c.charge(w.usage, 1)
	c.admitted.insert(w)
	e.fair.rekey(c)
	e.fair.markNeed(c)
	res.Admitted = append(res.Admitted, Admitted{Key: w.key, Admission: handOver(w)})
}

// noteSkip counts a cycle in which work behind a BestEffortFIFO head was admitted
// while the head was not.
func (order *queueOrder) noteSkip(c *cqState, head *wl) {
	if c.strict() || head == nil || head.skipCycle == order.clock.cycle {
		return
	}
	head.skips++
	head.skipCycle = order.clock.cycle
	if head.firstSkip == 0 {
		head.firstSkip = order.clock.now
	}
}

// reserving reports whether the queue reserves for its head (BestEffortFIFO
// anti-starvation, or a head waiting for its preemption victims).
func (order *queueOrder) reserving(c *cqState, head *wl) bool {
	if c.strict() || head == nil {
		return false
	}
	if head.reason != InsufficientQuota && head.reason != WaitingForPreemption {
		return false
	}
	if len(head.victims) > 0 || int(head.skips) >= order.opts.StarvationSkips {
		return true
	}
	age := int64(order.opts.StarvationAge)
	return age > 0 && head.firstSkip != 0 && order.clock.now-head.firstSkip >= age
}

// buildAdmission turns flavor choices (one per resource group) into an Admission and
// the usage it charges.
func (nm *names) buildAdmission(c *cqState, w *wl, flavors []int) (*Admission, []frAmt) {
	adm := &Admission{ClusterQueue: c.name, PodSets: make([]PodSetAssignment, len(w.podSets))}
	usage := make([]frAmt, 0, len(w.req))
	for _, r := range w.req {
		gi := c.resGroup[r.res]
		usage = append(usage, frAmt{fr: makeFR(c.groups[gi].flavors[flavors[gi]].id, r.res), amt: r.amt})
	}
	slices.SortFunc(usage, func(a, b frAmt) int { return cmpFR(a.fr, b.fr) })
	for i, ps := range w.podSets {
		m := make(map[ResourceName]string, len(ps.req))
		for _, r := range ps.req {
			gi := c.resGroup[r.res]
			m[nm.resources[r.res]] = c.groups[gi].flavors[flavors[gi]].name
		}
		adm.PodSets[i] = PodSetAssignment{Name: ps.name, Count: ps.count, Flavors: m}
	}
	return adm, usage
}
