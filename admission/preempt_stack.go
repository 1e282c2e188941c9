package admission

import "slices"

// Stacked preemptors: a ClusterQueue whose preemptor still waits for its
// victims may preempt for another workload in the same cycle, planned on
// the quota as it will be once the waiting preemptors are served.
//
// Two preemptors that each plan on the live counters plan on the same quota
// and limits: each counts only its own victims and claim, and the first
// admitted can push the queue to its borrowing limit or past its nominal
// quota so that the other no longer fits once its victims are gone (found by
// the preemptor check of FuzzConvergence). Once a queue preempted for one
// workload at a time, and a burst of replicas reclaiming lent quota took a
// round of victim terminations per victim. Planned on the stack instead —
// the waiting preemptors' victims gone, their held quota released, the
// preemptors and their riders charged where their plans put them — every
// later preemptor sees the limits the earlier ones will leave, and a burst
// reclaims all it needs in one cycle.
//
// What the earlier preemptors' victims free beyond their own needs and their
// riders' is not counted on (the stack never shows more quota available than
// the live counters do): it is held for those preemptors until they are
// served, so a later preemptor that counted on it would not fit once its own
// victims were gone and would preempt again. Each preemptor therefore waits
// only for its own victims and fits whenever they are gone, whichever of the
// queue's preemptors is served first.

// whatIf is one what-if change to a queue's counters, reverted in reverse.
type whatIf struct {
	cq    *cqState
	usage []frAmt
	sign  int64
}

// stacked runs f with the counters as they will be once the waiting
// preemptors of c other than w, and their riders, are served; on return
// every counter is as before.
func (pre *preemption) stacked(c *cqState, w *wl, f func()) {
	stack := pre.waitingIn(c, w)
	if len(stack) == 0 {
		f()
		return
	}
	keys := requestKeys(c, w)
	live := make([]int64, len(keys))
	for i, k := range keys {
		live[i] = c.available(k)
	}
	var undo []whatIf
	apply := func(q *cqState, u []frAmt, sign int64) {
		if q != nil && len(u) > 0 {
			q.charge(u, sign)
			undo = append(undo, whatIf{cq: q, usage: u, sign: sign})
		}
	}
	defer func() {
		for _, s := range slices.Backward(undo) {
			s.cq.charge(s.usage, -s.sign)
		}
	}()
	for _, p := range stack {
		for _, k := range p.victims {
			if v, ok := pre.workloads[k]; ok && v.evicting && v.evictFor == p.key {
				apply(pre.queues.cqs[v.admCQ], v.usage, -1)
			}
		}
		for _, g := range p.ghosts {
			apply(pre.queues.cqs[g.cq], g.usage, -1)
		}
		apply(c, p.plannedUse, 1)
		if pr := pre.rides[p.key]; pr != nil {
			for _, r := range pre.ridersOf(p, pr) {
				apply(c, pre.rides[r.key].took, 1)
			}
		}
	}
	for i, k := range keys {
		// Held for the stack's preemptors until they are served: not there
		// for w (see above). One unit charged takes one unit off what is
		// available, except where a limit already caps it: charge again.
		for range 2 {
			if d := c.available(k) - live[i]; d > 0 {
				apply(c, []frAmt{{fr: k, amt: d}}, 1)
			}
		}
	}
	f()
}

// waitingIn lists the preemptors of c, other than w, still waiting for their
// victims or to be served, and forgets those that no longer wait.
func (pre *preemption) waitingIn(c *cqState, w *wl) []*wl {
	c.preemptors = slices.DeleteFunc(c.preemptors, func(p *wl) bool {
		return p.phase != phasePending || pre.workloads[p.key] != p || p.cqName != c.name ||
			(len(p.victims) == 0 && !slices.Contains(pre.ready, p.key))
	})
	var out []*wl
	for _, p := range c.preemptors {
		if p != w {
			out = append(out, p)
		}
	}
	return out
}

// requestKeys lists the (flavor, resource) pairs w could use in c: each
// resource it requests in each flavor of the resource's group.
func requestKeys(c *cqState, w *wl) []frKey {
	var out []frKey
	for _, r := range w.req {
		gi, ok := c.resGroup[r.res]
		if !ok {
			continue
		}
		for _, f := range c.groups[gi].flavors {
			if k := makeFR(f.id, r.res); !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// plannedUse is w's usage in c with the flavor per resource group of a plan.
func plannedUse(c *cqState, w *wl, flavors []int) []frAmt {
	out := make([]frAmt, 0, len(w.req))
	for _, r := range w.req {
		gi := c.resGroup[r.res]
		if fi := flavors[gi]; fi >= 0 {
			out = append(out, frAmt{fr: makeFR(c.groups[gi].flavors[fi].id, r.res), amt: r.amt})
		}
	}
	return out
}
