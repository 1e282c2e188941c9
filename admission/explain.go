package admission

import "fmt"

// Explain says why a pending workload is not admitted: its position, the reason and
// message as they would be reported now, the shortfall per flavor, its queue's
// fair-share standing and what preemption would need. It changes nothing. The second
// result is false for unknown or non-pending workloads.
//
// Cost: O(position + tenants) plus one preemption what-if; meant for humans, not for
// every cycle.
func (e *Engine) Explain(key WorkloadKey) (Explanation, bool) {
	w, ok := e.workloads[key]
	if !ok || w.phase != phasePending {
		return Explanation{}, false
	}
	c := e.queues.cqs[w.cqName]
	pos := 0
	c.pending.ascend(func(x *wl) bool {
		if x == w {
			return false
		}
		pos++
		return true
	})
	head, _ := c.pending.min()
	ex := e.explainAt(c, w, head, pos)
	ex.FairShare = e.fair.standing(c)
	return ex, true
}

// explainAt explains pending workload w at position pos of c, whose head is
// head; FairShare is left to the caller, which may share it across a page.
func (e *Engine) explainAt(c *cqState, w, head *wl, pos int) Explanation {
	ex := Explanation{Position: pos}
	switch {
	case c.spec == nil || c.spec.held():
		ex.Reason, ex.Message = heldBecause(c)
	case c.strict() && w != head:
		ex.Reason, ex.Message = BlockedByHead, msgBlocked(c.name, head.key)
		ex.Mentions = []WorkloadKey{head.key}
	default:
		e.explainFit(c, w, head, &ex)
	}
	return ex
}

func (e *Engine) explainFit(c *cqState, w, head *wl, ex *Explanation) {
	// A preemptor whose victims are gone is served first in the next cycle,
	// with what was held for it released: explain that.
	e.pre.withoutOwnHold(w, func() { explainOutcome(e, c, w, head, ex) })
}

// explainOutcome fills ex from w's evaluation now (a plain function: the
// Engine's methods are its API and the steps of a cycle).
func explainOutcome(e *Engine, c *cqState, w, head *wl, ex *Explanation) {
	out := e.evaluate(c, w, head)
	ex.Reason = out.reason
	switch out.reason {
	case "":
		ex.Message = "fits now; it will be admitted in the next cycle"
		return
	case InsufficientQuota, ExceedsMaxQuota:
		ex.Shortfalls = e.names.shortfalls(c, w, out.group)
	}
	ex.Message = e.names.msgFor(c, w, out)
	if out.reason == ReservedForHead && head != nil {
		ex.Mentions = append(ex.Mentions, head.key)
	}
	if len(w.victims) > 0 {
		ex.Reason, ex.Message = WaitingForPreemption, msgWaitingOf(w)
		ex.Mentions = append(ex.Mentions, w.victims...)
	}
	if out.reason != InsufficientQuota && out.reason != TopologyUnavailable {
		ex.Preemption.Message = "preemption cannot help: " + string(out.reason)
		return
	}
	if w.preempted {
		ex.Preemption.Message = "it was evicted by a preemption and preempts nothing until it has been admitted again"
		return
	}
	// The same plan as the cycle's (settle, preempt): on the stack of the
	// queue's waiting preemptors.
	var p capPlan
	e.pre.stacked(c, w, func() { p = e.pre.plan(c, w) })
	if !p.ok && e.pre.busy(c, w) {
		busy := e.pre.waitingIn(c, w)[0].key
		ex.Preemption.Message = fmt.Sprintf("%s of the same ClusterQueue is preempting: no preemption fits beside it; it may preempt once that one is served", busy)
		ex.Mentions = append(ex.Mentions, busy)
		return
	}
	if !p.ok {
		ex.Preemption.Message = "no preemption allowed by the ClusterQueue's policy makes the workload fit"
		if p.note != "" {
			ex.Preemption.Message = "no preemption allowed by the ClusterQueue's policy frees both its quota and one domain that holds it"
			if out.reason == InsufficientQuota && len(w.victims) == 0 {
				ex.Message += p.note
			}
		}
		return
	}
	ex.Preemption.Possible = true
	for _, v := range p.victims {
		ex.Preemption.Victims = append(ex.Preemption.Victims, Preemption{
			Victim: v.w.key, Preemptor: w.key, Reason: v.reason, Message: e.names.msgPreemptedFor(c, w, v, p.target),
		})
		ex.Mentions = append(ex.Mentions, v.w.key)
	}
	ex.Preemption.Message = fmt.Sprintf("admitting it would preempt %d workload(s)", len(p.victims))
	if p.target != nil && p.target.check {
		ex.Preemption.Message += ", freeing capacity in " + p.target.where()
	}
}
