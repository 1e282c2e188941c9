package admission

import "slices"

// Riding: a pending workload that fits in what the victims of a waiting
// preemptor of its own ClusterQueue free beyond that preemptor's need waits
// for those victims too, instead of preempting victims of its own.
//
// Without it, a burst of small preemptors over-preempts: each plans on the
// live counters, where the victims already chosen still count (they hold
// their quota until they are gone), so each picks a victim of its own —
// 28 one-GPU serving replicas reclaiming from eight 4-GPU training jobs
// preempted all eight, one of them within training's own quota, and the
// surplus freed with the victims went back to the re-queued victims rather
// than to the replicas that waited for it. A rider waits for the same
// victims as its preemptor, is served first with it once they are gone (the
// held quota is freed at once then), and takes part of the surplus it
// counted on; the surplus is the preemptor's record (pool), reduced by each
// rider's need, so two riders never count on the same quota.

// rider is a preemptor's record of what its victims free beyond its need,
// and who rides on it.
type rider struct {
	rideOn WorkloadKey   // the preemptor whose victims a rider waits for
	pool   []frAmt       // a preemptor's victims' quota not yet counted on
	took   []frAmt       // a rider's part of its preemptor's pool
	riders []WorkloadKey // the workloads riding on a preemptor
}

// rideOf returns w's record, created if need be.
func (pre *preemption) rideOf(w *wl) *rider {
	if pre.rides == nil {
		pre.rides = map[WorkloadKey]*rider{}
	}
	r := pre.rides[w.key]
	if r == nil {
		r = &rider{}
		pre.rides[w.key] = r
	}
	return r
}

// forgetRide drops w's record: admitted, or gone.
func (pre *preemption) forgetRide(w *wl) { delete(pre.rides, w.key) }

// openPool records, for preemptor w that now waits for vs, what the victims
// free beyond what w needs of it: the quota riders may count on.
func (pre *preemption) openPool(c *cqState, w *wl, vs []victim, flavors []int) {
	var pool []frAmt
	freed := map[frKey]int64{}
	for _, v := range vs {
		for _, u := range v.w.usage {
			freed[u.fr] += u.amt
		}
	}
	for _, r := range w.req {
		k := makeFR(c.groups[c.resGroup[r.res]].flavors[flavors[c.resGroup[r.res]]].id, r.res)
		freed[k] -= r.amt
	}
	for k, amt := range freed {
		if amt > 0 {
			pool = append(pool, frAmt{fr: k, amt: amt})
		}
	}
	if len(pool) == 0 {
		return
	}
	slices.SortFunc(pool, func(a, b frAmt) int { return cmpFR(a.fr, b.fr) })
	pre.rideOf(w).pool = pool
	if !slices.Contains(pre.pooled, w.key) {
		pre.pooled = append(pre.pooled, w.key)
	}
}

// ride makes w wait for the victims of a waiting preemptor of its own
// ClusterQueue whose pool holds all of w's requests, in flavors of w's
// resource groups, and reports whether it did. Gangs that need a domain,
// and workloads evicted by a preemption (which preempt nothing until
// admitted again), do not ride.
func (pre *preemption) ride(c *cqState, w *wl) bool {
	if w.topo != nil || w.preempted {
		return false
	}
	pre.pooled = slices.DeleteFunc(pre.pooled, func(k WorkloadKey) bool {
		p, ok := pre.workloads[k]
		return !ok || p.phase != phasePending || len(p.victims) == 0 || pre.rides[k] == nil || len(pre.rides[k].pool) == 0
	})
	for _, k := range pre.pooled {
		p, pr := pre.workloads[k], pre.rides[k]
		if p.cqName != c.name || p == w {
			continue
		}
		take, ok := fitsPool(c, w, pr.pool)
		if !ok {
			continue
		}
		for _, t := range take {
			i := slices.IndexFunc(pr.pool, func(a frAmt) bool { return a.fr == t.fr })
			pr.pool[i].amt -= t.amt
		}
		pr.pool = slices.DeleteFunc(pr.pool, func(a frAmt) bool { return a.amt <= 0 })
		rw := pre.rideOf(w)
		rw.rideOn, rw.took = p.key, take
		w.victims = slices.Clone(p.victims)
		pr.riders = append(pr.riders, w.key)
		return true
	}
	return false
}

// fitsPool returns, for each of w's requests, the pool entry's amount it
// would take: a flavor of the request's resource group in c.
func fitsPool(c *cqState, w *wl, pool []frAmt) ([]frAmt, bool) {
	take := make([]frAmt, 0, len(w.req))
	for _, r := range w.req {
		gi, ok := c.resGroup[r.res]
		if !ok {
			return nil, false
		}
		i := slices.IndexFunc(pool, func(a frAmt) bool {
			return a.fr.res() == r.res && a.amt >= r.amt && c.opens(w, gi, a.fr.flavor()) &&
				slices.ContainsFunc(c.groups[gi].flavors, func(f flavorState) bool { return f.id == a.fr.flavor() })
		})
		if i < 0 {
			return nil, false
		}
		take = append(take, frAmt{fr: pool[i].fr, amt: r.amt})
	}
	return take, len(take) > 0
}

// victimGoneForRiders removes victim v from the lists of p's riders; when p
// has no victim left, its riders are served first in the next Cycle with it.
func (pre *preemption) victimGoneForRiders(p *wl, v WorkloadKey) {
	pr := pre.rides[p.key]
	if pr == nil {
		return
	}
	for _, r := range pre.ridersOf(p, pr) {
		r.victims = slices.DeleteFunc(r.victims, func(x WorkloadKey) bool { return x == v })
		if len(p.victims) == 0 {
			r.victims = nil
			pre.forgetRide(r)
			if pre.readyRiders == nil {
				pre.readyRiders = map[WorkloadKey][]WorkloadKey{}
			}
			pre.readyRiders[p.key] = append(pre.readyRiders[p.key], r.key)
			pre.order.makeFresh(pre.queues.cqs[r.cqName], r)
		}
	}
	if len(p.victims) == 0 {
		pre.forgetRide(p)
	}
}

// withRiders returns the ready preemptors ws, each followed by its riders
// whose victims are gone with its own: served right after it, they take
// the surplus its held quota leaves once it is released (when the
// preemptor is served), before the victims queued again can.
func (pre *preemption) withRiders(ws []*wl) []*wl {
	if len(pre.readyRiders) == 0 {
		return ws
	}
	out := make([]*wl, 0, len(ws))
	for _, w := range ws {
		out = append(out, w)
		for _, k := range pre.readyRiders[w.key] {
			if r, ok := pre.workloads[k]; ok && r.phase == phasePending && !slices.Contains(out, r) && !slices.Contains(ws, r) {
				out = append(out, r)
			}
		}
	}
	clear(pre.readyRiders)
	return out
}

// ridersOf lists the pending workloads that still ride on p.
func (pre *preemption) ridersOf(p *wl, pr *rider) []*wl {
	var out []*wl
	for _, k := range pr.riders {
		r, ok := pre.workloads[k]
		if ok && r.phase == phasePending && pre.rides[k] != nil && pre.rides[k].rideOn == p.key {
			out = append(out, r)
		}
	}
	return out
}

// dropRiders frees the riders of a preemptor that stopped waiting without
// its victims being gone (deleted, changed): they are evaluated afresh.
func (pre *preemption) dropRiders(p *wl) {
	if pr := pre.rides[p.key]; pr != nil {
		for _, r := range pre.ridersOf(p, pr) {
			r.victims = nil
			pre.forgetRide(r)
			pre.order.makeFresh(pre.queues.cqs[r.cqName], r)
		}
	}
	pre.forgetRide(p)
}

// behind reports whether w, which found no preemption on the stack of the
// queue's waiting preemptors, must wait for them to be served before it may
// try again (what their victims free beyond their needs is held for them
// until then, preempt_stack.go), and if so files w to be evaluated again
// then rather than parked: parked, it would wait for free quota that no one
// frees, as the quota it needs is held by borrowers it could preempt.
func (pre *preemption) behind(c *cqState, w *wl) bool {
	if w.preempted || !pre.canPreempt(c) || !pre.busy(c, w) {
		return false
	}
	if len(c.behindPreemptor) == 0 {
		pre.behindQueues = append(pre.behindQueues, c)
	}
	if !slices.Contains(c.behindPreemptor, w) {
		c.behindPreemptor = append(c.behindPreemptor, w)
	}
	return true
}

// wakeBehind, at the end of a cycle, makes fresh the workloads of each
// queue whose preemptor was served or went: they may preempt now.
func (pre *preemption) wakeBehind() {
	pre.behindQueues = slices.DeleteFunc(pre.behindQueues, func(c *cqState) bool {
		if pre.busy(c, nil) {
			return false
		}
		for _, w := range c.behindPreemptor {
			// Still queued here: not admitted, moved, held or deleted since.
			if w.phase == phasePending && pre.workloads[w.key] == w && w.cqName == c.name && c.pending.has(w) && len(w.victims) == 0 {
				pre.order.makeFresh(c, w)
			}
		}
		c.behindPreemptor = c.behindPreemptor[:0]
		return true
	})
}
