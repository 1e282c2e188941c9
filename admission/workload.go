package admission

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// UpsertWorkload adds or updates a workload. It is idempotent.
//
//   - Admission == nil: the workload is pending. If the engine had it admitted and the
//     admission was confirmed (an earlier upsert carried it), this is an eviction: its
//     usage is released and it returns to the queue. If the admission was only assumed
//     (returned by Cycle, not yet confirmed), the upsert is a stale event and is ignored;
//     call Rollback if the admission could not be persisted.
//
//   - Admission != nil: the workload is admitted and counts as usage of
//     Admission.ClusterQueue; it is never admitted again. This confirms an assumed
//     admission, or rebuilds state after a restart.
//
//   - Admission == nil with a Booking that gave up: the workload is not queued (as if
//     deleted) until it is upserted without one.
//
// Invalid input returns an error and changes nothing.
func (e *Engine) UpsertWorkload(w Workload) error {
	old, exists := e.workloads[w.Key]
	gaveUp := w.Booking != nil && w.Booking.GaveUp
	if reason, msg := w.Unqueueable(); reason != "" && w.Admission == nil && !gaveUp && (!exists || old.phase != phaseAssumed) {
		// Held whatever its spec, as if deleted: see eligibility.go. One
		// that gave up is dropped below, with no reason to report.
		e.elig.hold(w.Key, reason, msg, e.DeleteWorkload)
		return nil
	}
	nw, err := e.names.compileWorkload(&w)
	if err != nil {
		return fmt.Errorf("invalid workload %s: %w", w.Key, err)
	}
	e.elig.forget(w.Key)
	defer func() {
		if e.topo.freed {
			e.wakes.capacityChanged()
		}
	}()
	defer e.evict.takeFacts(&w)
	if w.Admission == nil && w.Booking != nil && w.Booking.GaveUp && (!exists || old.phase != phaseAssumed) {
		e.DeleteWorkload(w.Key)
		return nil
	}
	switch {
	case !exists:
		e.workloads[w.Key] = nw
		if w.Admission != nil {
			e.admitExisting(nw)
		} else {
			e.enqueue(nw)
		}
	case w.Admission == nil && old.phase == phaseAssumed:
		// Stale event from before the admission; the assumed admission stands.
	case w.Admission == nil && old.phase == phasePending:
		if !samePending(old, nw) {
			prev := e.queues.cqs[old.cqName]
			e.dequeue(old)
			// A workload that moved, or asks for more than its start tag
			// was charged for, is tagged again: behind its LocalQueue's
			// work, charged its new size. Kept, a tag given to a small
			// request would let a LocalQueue queue small and grow while it
			// waits, paying for turns it takes at the small size.
			old.tagged = old.tagged && old.cqName == nw.cqName && old.lq == nw.lq && !asksMore(old.req, nw.req)
			old.takeSpec(nw)
			e.enqueue(old)
			e.queues.maybeDropCQ(prev)
		}
	case w.Admission == nil: // confirmed admission evicted
		old.preempted = old.evicting && old.deciding != BookingEvict
		e.release(old)
		old.takeSpec(nw)
		old.reason, old.msgHash = "", 0
		delete(e.books.reports, old.key) // about an attempt that is over
		delete(e.books.counts, old.key)
		e.requeue(old)
	default: // input is admitted
		e.upsertAdmitted(old, nw)
	}
	return nil
}

// upsertAdmitted applies an admitted upsert to a known workload.
func (e *Engine) upsertAdmitted(old, nw *wl) {
	if old.phase == phasePending {
		e.dequeue(old)
		e.pre.releaseGhosts(old)
		e.pre.dropRiders(old)
	} else {
		if old.admCQ == nw.admCQ && slices.Equal(old.usage, nw.usage) && old.prio == nw.prio &&
			sameAssignment(old.adm.Topology, nw.adm.Topology) && samePlan(old.adm.Provisioning, nw.adm.Provisioning) &&
			(nw.admitTime == 0 || nw.admitTime == old.admitTime) {
			old.phase = phaseAdmitted
			old.adm = nw.adm
			old.uid, old.lq, old.cqName, old.gen = nw.uid, nw.lq, nw.cqName, nw.gen
			e.books.confirmBooking(old, nw.bk)
			return
		}
		if nw.admitTime == 0 {
			nw.admitTime = old.admitTime
		}
		nw.evicting, nw.evictFor, nw.deciding = old.evicting, old.evictFor, old.deciding
		nw.evictedAs = old.evictedAs
		old.evicting = false // keep the mark on nw; do not wake the preemptor
		e.release(old)
	}
	nw.reason, nw.msgHash = old.reason, old.msgHash
	e.workloads[nw.key] = nw
	e.admitExisting(nw)
	e.books.confirmBooking(nw, nw.bk)
}

// DeleteWorkload forgets a finished or deleted workload: a pending one leaves its
// queue, an admitted one releases its usage. Idempotent.
func (e *Engine) DeleteWorkload(key WorkloadKey) {
	e.elig.forget(key) // a held workload is in no queue
	w, ok := e.workloads[key]
	if !ok {
		return
	}
	if w.phase == phasePending {
		e.dequeue(w)
		e.pre.releaseGhosts(w)
		e.pre.dropRiders(w)
	} else {
		e.release(w)
	}
	delete(e.workloads, key)
	delete(e.books.reports, key)
	delete(e.books.counts, key)
	delete(e.evict.changes, key)
	if c, ok := e.queues.cqs[w.cqName]; ok {
		e.queues.maybeDropCQ(c)
	}
}

// Rollback undoes a decision of Cycle that the caller could not persist:
//
//   - for a workload admitted by Cycle and not yet confirmed: it returns to pending
//     exactly as before (same queue position, same last reported status) and its
//     usage is released;
//   - for a preemption victim whose eviction could not be written: it is no longer
//     marked for eviction, and its preemptor is re-evaluated in the next Cycle;
//   - for a booking decision that could not be written: it is undone (an eviction
//     it started is unmarked) and decided again in the next Cycle.
//
// Anything else is a no-op.
func (e *Engine) Rollback(key WorkloadKey) {
	w, ok := e.workloads[key]
	if !ok {
		return
	}
	if w.deciding != 0 {
		w.deciding = 0
		e.books.bookingDirty[key] = struct{}{}
	}
	if w.evicting {
		e.pre.clearEviction(w)
	}
	e.evict.rollback(w)
	if w.phase != phaseAssumed {
		return
	}
	c := e.queues.cqs[w.admCQ]
	restore := c.lastAdmit == w.admitSeq
	e.release(w)
	if restore {
		c.lastAdmit, c.vtime = w.prevLast, w.prevV
		e.fair.rekey(c)
	}
	e.enqueue(w)
}

// enqueue inserts a pending workload into its queue, giving it a LocalQueue
// fair-sharing start tag if it has none.
func (e *Engine) enqueue(w *wl) {
	w.phase = phasePending
	w.adm, w.admCQ, w.usage = nil, "", nil
	c := e.queues.cqStateFor(w.cqName)
	if !w.tagged {
		e.fair.tag(c, w)
	}
	c.pending.insert(w)
	c.fresh.insert(w)
	e.fair.markOwn(c)
	if head, _ := c.pending.min(); head == w {
		e.fair.rekey(c)
		e.fair.markNeed(c) // the wake need follows the head
	}
}

// requeue returns an evicted workload to its queue. It keeps its start tag, so it
// returns to its place; one admitted before a restart has none and is queued at
// the queue's virtual time, ahead of work queued since, without charging its
// LocalQueue again.
func (e *Engine) requeue(w *wl) {
	if !w.tagged && e.opts.LocalQueueFairSharing {
		w.vstart, w.tagged = e.queues.cqStateFor(w.cqName).vtime, true
	}
	e.enqueue(w)
}

// dequeue removes a pending workload from its queue.
func (e *Engine) dequeue(w *wl) {
	c := e.queues.cqs[w.cqName]
	head, _ := c.pending.min()
	c.pending.remove(w)
	c.fresh.remove(w)
	e.order.unpark(c, w)
	if head == w {
		e.order.headLeft(c, w)
		e.fair.rekey(c)
	}
	e.fair.markNeed(c)
}

// headLeft keeps the queue's freshness right when its head leaves: under StrictFIFO
// the new head was never evaluated on its own; under BestEffortFIFO the old head may
// have held a reservation that blocked others.
func (order *queueOrder) headLeft(c *cqState, old *wl) {
	if c.refresh == refreshAll {
		return
	}
	if c.strict() {
		if h, ok := c.pending.min(); ok {
			order.makeFresh(c, h)
		}
		return
	}
	// A head that reserved for its victims has none left when it is served
	// (serveReady): what it blocked is released whatever made it reserve, or
	// it would stay blocked behind a head that is gone.
	if old.skips > 0 || len(old.victims) > 0 || c.reserved.len() > 0 {
		order.liftReservation(c)
	}
}

// liftReservation releases the workloads that a reserving head blocked into the
// parked index, as candidates whenever what they need is available (they keep their
// ReservedForHead status until they are next evaluated). Done now between cycles, at
// the end of the running cycle otherwise (so no workload is evaluated twice in a
// cycle).
func (order *queueOrder) liftReservation(c *cqState) {
	if order.fair.inCycle() {
		order.deferred = append(order.deferred, c)
		return
	}
	var ws []*wl
	c.reserved.ascend(func(w *wl) bool { ws = append(ws, w); return true })
	for _, w := range ws {
		if !order.park(c, w) {
			order.makeFresh(c, w)
		}
	}
	c.refresh = max(c.refresh, refreshCapacity)
	order.fair.markOwn(c)
}

// admitExisting charges an already-admitted workload (rebuilt or confirmed).
func (e *Engine) admitExisting(w *wl) {
	w.phase, w.preempted = phaseAdmitted, false
	if w.placed == nil {
		w.placed = e.topo.planOnNodes(w, e.books.keepsNewNodes(w))
		e.topo.reserve(w.placed, 1)
	}
	c := e.queues.cqStateFor(w.admCQ)
	c.charge(w.usage, 1)
	c.admitted.insert(w)
	e.fair.rekey(c)
	e.books.trackBooking(w)
}

// release returns an admitted or assumed workload's usage and wakes its cohort. A
// victim released while its preemptor still waits does not free its quota yet: the
// usage is held for the preemptor (a "ghost") — and, for a preemptor that needs a
// domain, its placement too — until the preemptor's last victim is gone and it is
// served, first in the next Cycle, where they are freed at once. Without the hold,
// capacity freed by the first victims could be taken by anyone in the cohort (even
// re-admitting the victim), and the preemptor would preempt again.
func (e *Engine) release(w *wl) {
	delete(e.books.booking, w)
	delete(e.books.awaiting, w)
	delete(e.books.pinning, w)
	w.deciding = 0
	if !e.pre.keepPlacement(w) { // else held for the preemptor waiting for w
		e.topo.reserve(w.placed, -1)
		e.wakes.capacityChanged()
	}
	w.placed = nil
	c := e.queues.cqs[w.admCQ]
	c.admitted.remove(w)
	if w.evicting {
		if p := e.pre.waitingPreemptor(w); p != nil {
			p.ghosts = append(p.ghosts, ghost{cq: c.name, usage: w.usage})
			w.evicting, w.evictFor = false, WorkloadKey{}
			e.pre.victimGone(p, w.key)
			return
		}
		e.pre.clearEviction(w)
	}
	c.charge(w.usage, -1)
	e.fair.touchQueueAndCohort(c, refreshCapacity)
	e.queues.maybeDropCQ(c)
}

// waitingPreemptor returns the pending preemptor that still waits for victim v.
func (pre *preemption) waitingPreemptor(v *wl) *wl {
	p, ok := pre.workloads[v.evictFor]
	if !ok || p.phase != phasePending || !slices.Contains(p.victims, v.key) {
		return nil
	}
	return p
}

// clearEviction unmarks a victim (eviction rolled back, or the victim went away)
// and tells its preemptor.
func (pre *preemption) clearEviction(v *wl) {
	p := pre.waitingPreemptor(v)
	v.evicting, v.evictFor = false, WorkloadKey{}
	if p != nil {
		pre.victimGone(p, v.key)
	}
}

// victimGone removes a victim from its preemptor's list; when it was the last one,
// the preemptor is served first in the next Cycle, and the quota and capacity
// held for it are freed just before (serveReady): until then nothing, not
// even another preemptor served before it, can take them.
func (pre *preemption) victimGone(p *wl, v WorkloadKey) {
	p.victims = slices.DeleteFunc(p.victims, func(k WorkloadKey) bool { return k == v })
	pre.victimGoneForRiders(p, v)
	if len(p.victims) > 0 {
		return
	}
	pre.ready = append(pre.ready, p.key)
	pre.order.makeFresh(pre.queues.cqs[p.cqName], p)
}

// releaseGhosts frees the quota and capacity held for a preemptor.
func (pre *preemption) releaseGhosts(p *wl) {
	pre.releaseHold(p)
	for _, g := range p.ghosts {
		c := pre.queues.cqs[g.cq]
		c.charge(g.usage, -1)
		pre.fair.touchQueueAndCohort(c, refreshCapacity)
		pre.queues.maybeDropCQ(c)
	}
	p.ghosts = nil
}

// takeSpec copies the spec fields of n into w (w not in any index).
func (w *wl) takeSpec(n *wl) {
	w.uid, w.lq, w.cqName, w.prio, w.created = n.uid, n.lq, n.cqName, n.prio, n.created
	w.lqWeight = n.lqWeight
	w.podSets, w.req, w.topo, w.filtered = n.podSets, n.req, n.topo, n.filtered
	w.bk, w.notBefore, w.avoid, w.gen = n.bk, n.notBefore, n.avoid, n.gen
}

// asksMore reports whether the requests to ask for more of some resource
// than the requests from (both sorted by resource, as wl.req is).
func asksMore(from, to []resAmt) bool {
	for _, r := range to {
		i, found := slices.BinarySearchFunc(from, r.res, func(x resAmt, res int32) int { return cmp.Compare(x.res, res) })
		if !found || r.amt > from[i].amt {
			return true
		}
	}
	return false
}

func samePending(a, b *wl) bool {
	return a.uid == b.uid && a.lq == b.lq && a.lqWeight == b.lqWeight && a.cqName == b.cqName && a.prio == b.prio &&
		a.created == b.created && equalTopology(a.topo, b.topo) && a.notBefore == b.notBefore && a.gen == b.gen &&
		slices.EqualFunc(a.avoid, b.avoid, func(x, y TopologyAssignment) bool { return sameAssignment(&x, &y) }) &&
		sameRecord(a.bk, b.bk) && slices.EqualFunc(a.podSets, b.podSets, func(x, y podSetSpec) bool {
		return x.name == y.name && x.count == y.count && slices.Equal(x.req, y.req) && sameConstraints(x, y)
	})
}

// compileWorkload validates w and converts it to engine state (not yet indexed).
func (nm *names) compileWorkload(w *Workload) (*wl, error) {
	if w.Key.Name == "" {
		return nil, errors.New("key.name must not be empty")
	}
	if w.ClusterQueue == "" {
		return nil, errors.New("clusterQueue must not be empty")
	}
	if len(w.PodSets) == 0 {
		return nil, errors.New("at least one pod set is required")
	}
	if w.LocalQueueWeight < 0 || w.LocalQueueWeight > MaxAmount {
		return nil, fmt.Errorf("localQueueWeight %d: must be between 0 and %d", w.LocalQueueWeight, MaxAmount)
	}
	n := &wl{key: w.Key, uid: w.UID, lq: w.LocalQueue, cqName: w.ClusterQueue, prio: w.Priority, created: w.CreationTime,
		wlFair: wlFair{lqWeight: w.LocalQueueWeight}, wlQueueing: wlQueueing{parkRes: -1}}
	if t := w.Topology; t != nil {
		if t.Mode != TopologyRequired && t.Mode != TopologyPreferred {
			return nil, fmt.Errorf("topology.mode %q: must be Required or Preferred", t.Mode)
		}
		if t.Level == "" {
			return nil, errors.New("topology.level must not be empty")
		}
		n.topo = &TopologyRequest{Mode: t.Mode, Level: t.Level}
	}
	n.gen = w.Generation
	if b := w.Booking; b != nil {
		bk := cloneBooking(*b)
		n.bk = &bk
		if w.Admission == nil {
			// A failed booking: wait for the retry, elsewhere.
			n.notBefore, n.avoid = bk.RetryAfter, bk.FailedDomains
		}
	}
	totals := map[int32]int64{}
	for i, ps := range w.PodSets {
		spec, err := nm.compilePodSet(ps, n.podSets, totals)
		if err != nil {
			return nil, fmt.Errorf("podSets[%d] %q: %w", i, ps.Name, err)
		}
		n.podSets = append(n.podSets, spec)
	}
	if err := compileApart(w.PodSets, n.podSets); err != nil {
		return nil, err
	}
	n.filtered = filtered(n.podSets)
	for r, a := range totals {
		n.req = append(n.req, resAmt{res: r, amt: a})
	}
	slices.SortFunc(n.req, func(a, b resAmt) int { return int(a.res) - int(b.res) })
	if w.Admission != nil {
		if err := nm.compileAdmission(n, w.Admission); err != nil {
			return nil, fmt.Errorf("admission: %w", err)
		}
		n.admitTime = w.AdmissionTime
	}
	return n, nil
}

func (nm *names) compilePodSet(ps PodSet, prev []podSetSpec, totals map[int32]int64) (podSetSpec, error) {
	if ps.Name == "" {
		return podSetSpec{}, errors.New("name must not be empty")
	}
	if slices.ContainsFunc(prev, func(p podSetSpec) bool { return p.name == ps.Name }) {
		return podSetSpec{}, errors.New("duplicate pod set name")
	}
	if ps.Count < 1 {
		return podSetSpec{}, fmt.Errorf("count %d: must be at least 1", ps.Count)
	}
	if err := validateFilter(ps.Nodes); err != nil {
		return podSetSpec{}, err
	}
	spec := podSetSpec{name: ps.Name, count: ps.Count, nodes: ps.Nodes, tols: slices.Clone(ps.Tolerations)}
	spec.filterHash = nm.hashFilter(spec.filterKey())
	for r, q := range ps.Requests {
		if r == "" {
			return podSetSpec{}, errors.New("request with an empty resource name")
		}
		if q < 0 || q > MaxAmount/int64(ps.Count) {
			return podSetSpec{}, fmt.Errorf("request %s=%d: must be between 0 and %d per pod", r, q, MaxAmount/int64(ps.Count))
		}
		if q == 0 {
			continue
		}
		id := nm.resID(r)
		spec.req = append(spec.req, resAmt{res: id, amt: q})
		totals[id] += q * int64(ps.Count)
		if totals[id] > MaxAmount {
			return podSetSpec{}, fmt.Errorf("total request of %s exceeds %d", r, MaxAmount)
		}
	}
	slices.SortFunc(spec.req, func(a, b resAmt) int { return int(a.res) - int(b.res) })
	return spec, nil
}

// compileAdmission validates an admission against the pod sets and computes usage.
func (nm *names) compileAdmission(n *wl, a *Admission) error {
	if a.ClusterQueue == "" {
		return errors.New("clusterQueue must not be empty")
	}
	if len(a.PodSets) != len(n.podSets) {
		return fmt.Errorf("has %d pod sets, the workload has %d", len(a.PodSets), len(n.podSets))
	}
	usage := map[frKey]int64{}
	for i, psa := range a.PodSets {
		ps := n.podSets[i]
		if psa.Name != ps.name {
			return fmt.Errorf("podSets[%d] is %q, the workload's is %q", i, psa.Name, ps.name)
		}
		for _, r := range ps.req {
			f, ok := psa.Flavors[nm.resources[r.res]]
			if !ok || f == "" {
				return fmt.Errorf("pod set %q: no flavor assigned for requested resource %q", ps.name, nm.resources[r.res])
			}
			usage[makeFR(nm.flavorID(f), r.res)] += r.amt * int64(ps.count)
		}
	}
	for k, v := range usage {
		n.usage = append(n.usage, frAmt{fr: k, amt: v})
	}
	slices.SortFunc(n.usage, func(a, b frAmt) int { return cmpFR(a.fr, b.fr) })
	n.adm = engineAdmission(a)
	n.admCQ = a.ClusterQueue
	return nil
}

func cmpFR(a, b frKey) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func sameAssignment(a, b *TopologyAssignment) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Flavor == b.Flavor && a.Level == b.Level && slices.Equal(a.Domain, b.Domain))
}

func equalTopology(a, b *TopologyRequest) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// engineAdmission is the engine's copy of an admission: its queue,
// generation, placement and booking plan, copied. It leaves out the pod
// sets' flavor maps, which the engine never reads (the flavors it charges
// are in the workload's usage), so an admission costs no copy of them.
func engineAdmission(a *Admission) *Admission {
	out := &Admission{ClusterQueue: a.ClusterQueue, Generation: a.Generation}
	if a.Topology != nil {
		t := *a.Topology
		t.Domain, t.Levels = slices.Clone(t.Domain), slices.Clone(t.Levels)
		out.Topology = &t
	}
	if a.Provisioning != nil {
		plan := *a.Provisioning
		plan.NewNodes = maps.Clone(plan.NewNodes)
		out.Provisioning = &plan
	}
	return out
}

// handOver gives the caller the admission the engine has just built for w:
// its own copy of the placement and booking plan, which the engine keeps
// and reads, and the pod sets with their flavor maps, built for this
// result alone, which pass to the caller uncopied and leave the engine.
func handOver(w *wl) Admission {
	out := *engineAdmission(w.adm)
	out.PodSets, w.adm.PodSets = w.adm.PodSets, nil
	return out
}
