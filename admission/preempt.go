package admission

import (
	"slices"
	"strings"
)

// preemption chooses victims for a workload that does not fit: within its
// ClusterQueue by priority, in its cohort to reclaim lent quota or by fair
// share, the fewest that make it fit (planPreemption), and holds the quota
// they free for it (claim); when a victim is gone it releases the held quota
// and readies the preemptor (workload.go). A preemptor's victims and held
// quota are in its wlPreemption record.
type preemption struct {
	opts      *Options
	names     *names
	topo      *topology
	fair      *fairSharing
	workloads map[WorkloadKey]*wl
	queues    *clusterQueues
	order     *queueOrder
	// ready lists preemptors whose victims are all gone: served first in the
	// next Cycle.
	ready []WorkloadKey
	// pooled lists preemptors whose victims free more than they need: what
	// riders may count on (ride.go).
	pooled []WorkloadKey
	// rides holds the records of preemptors with a pool and of riders, the
	// few workloads that have one (ride.go).
	rides map[WorkloadKey]*rider
	// behindQueues are the queues with workloads behind their preemptor.
	behindQueues []*cqState
	// readyRiders are, per ready preemptor, its riders: served right after
	// it (ride.go).
	readyRiders map[WorkloadKey][]WorkloadKey
	// deferredHolds is capacity held for preemptors admitted in the running
	// cycle, returned when it ends (preempt_topology.go).
	deferredHolds []*placement
	// leaving caches, for the plan being made, the usage leaving each queue
	// (freesFully).
	leaving map[*cqState]map[frKey]int64
}

// victim is a preemption candidate with the rule that allows it.
type victim struct {
	w      *wl
	cq     *cqState
	reason PreemptionReason
}

// settle records the outcome of a workload that was evaluated and not admitted: it
// proposes preemptions where the policy allows and they make the workload fit, and
// reports the pending status.
func (e *Engine) settle(c *cqState, w *wl, out outcome, res *Result) {
	switch out.reason {
	case InsufficientQuota:
		if len(w.victims) > 0 {
			report(w, WaitingForPreemption, msgWaitingOf(w), res, w.victims...)
			return
		}
		if e.pre.ride(c, w) {
			report(w, WaitingForPreemption, msgWaitingOf(w), res, w.victims...)
			return
		}
		ok, note := e.pre.preempt(c, w, res)
		if ok {
			report(w, WaitingForPreemption, msgWaitingOf(w), res, w.victims...)
			return
		}
		if e.pre.behind(c, w) {
			report(w, InsufficientQuota, e.names.msgInsufficient(c, w, out.group)+note, res)
			return
		}
		report(w, InsufficientQuota, e.names.msgInsufficient(c, w, out.group)+note, res)
		e.order.toPark = append(e.order.toPark, w)
		if note != "" {
			// Victims could free its quota but no domain: capacity that
			// frees may change that, as well as released quota.
			e.topo.waitForCapacity(w, "")
		}
	case ReservedForHead:
		msg, head := msgReserved(c)
		report(w, out.reason, msg, res, head)
		c.reserved.insert(w)
		w.held = true
	case TopologyUnavailable, ExceedsDomainCapacity, UnknownTopologyLevel:
		if out.reason == TopologyUnavailable {
			// Its quota fits but no domain has room: victims that free one
			// (preempt_topology.go) let it in.
			if len(w.victims) > 0 {
				report(w, WaitingForPreemption, msgWaitingOf(w), res, w.victims...)
				return
			}
			if ok, _ := e.pre.preempt(c, w, res); ok {
				report(w, WaitingForPreemption, msgWaitingOf(w), res, w.victims...)
				return
			}
		}
		// Each waits for capacity or a flavor's levels to change: a flavor
		// created after the gang's job, a node or pool that joins.
		report(w, out.reason, e.names.msgFor(c, w, out), res)
		e.topo.waitForCapacity(w, out.flavor)
	default:
		report(w, out.reason, e.names.msgFor(c, w, out), res)
	}
}

// preempt plans preemptions for w and, if a plan makes it fit, marks the victims,
// claims the free quota (and, for a gang that needs capacity, the free
// capacity of its domain) the plan counts on and reports w as waiting. Without
// a plan, note may say why (victims could free quota but no domain).
//
// A queue whose earlier preemptors still wait plans on the stack: as it will
// be once they are served (preempt_stack.go).
//
// No cascades: a workload evicted by a preemption preempts nothing until it has been
// admitted again. Every preemptor is then a workload that was not itself a victim;
// since a preemptor is admitted once its victims are gone (their quota and its claim
// are held for it), each preemption removes one such workload from the pending set
// and a closed system runs out of preemptions. Without the rule, preemptions of
// different kinds chain into loops (in-queue preemption changing which flavor a
// queue uses, which re-enables a fair-share preemption: found by FuzzConvergence).
//
// A gang whose admission depends on capacity (a topology domain, or a flavor
// that books) preempts only victims that also free one domain for it (plan,
// preempt_topology.go): freed quota alone says nothing about where capacity
// frees, and such a preemption looped — the preemptor still did not fit, the
// victim was admitted again, and the preemptor preempted again (found by
// FuzzConvergence, seed c205cd123dfa3188).
func (pre *preemption) preempt(c *cqState, w *wl, res *Result) (bool, string) {
	if w.preempted {
		return false, ""
	}
	var p capPlan
	pre.stacked(c, w, func() {
		if p = pre.plan(c, w); p.ok {
			pre.claim(c, w, p.victims, p.flavors)
		}
	})
	pre.fair.rekey(c)
	if !p.ok {
		return false, p.note
	}
	w.plannedUse = plannedUse(c, w, p.flavors)
	pre.dropHold(w)
	if p.target != nil {
		pre.holdDomain(w, p)
	}
	pre.openPool(c, w, p.victims, p.flavors)
	if !slices.Contains(c.preemptors, w) {
		c.preemptors = append(c.preemptors, w)
	}
	w.victims = w.victims[:0]
	for _, v := range p.victims {
		v.w.evicting, v.w.evictFor = true, w.key
		w.victims = append(w.victims, v.w.key)
		res.Preemptions = append(res.Preemptions, Preemption{
			Victim: v.w.key, Preemptor: w.key, Reason: v.reason, Message: pre.names.msgPreemptedFor(c, w, v, p.target),
		})
	}
	return true, ""
}

// busy reports whether another workload of c is a preemptor still waiting
// for its victims or to be served: w then plans its own preemption on the
// stack (preempt_stack.go).
func (pre *preemption) busy(c *cqState, w *wl) bool {
	return len(pre.waitingIn(c, w)) > 0
}

// canPreempt reports whether the queue's policy allows any kind of preemption.
func (pre *preemption) canPreempt(c *cqState) bool {
	p := c.spec.Preemption
	if isOn(p.WithinClusterQueue) {
		return true
	}
	return c.cohort != nil && (isOn(p.ReclaimWithinCohort) || (pre.opts.FairSharing && isOn(fairMode(c))))
}

func isOn(m PreemptionMode) bool { return m != "" && m != PreemptNever }

func fairMode(c *cqState) PreemptionMode {
	if m := c.spec.Preemption.FairSharing; m != "" {
		return m
	}
	return c.spec.Preemption.ReclaimWithinCohort
}

// planPreemption finds the victims whose eviction makes w fit, or false. It works on
// the live usage counters as a what-if (apply, check, revert): on return every
// counter is exactly as before.
//
// Per resource group that does not fit, flavors are tried in the queue's order; for a
// flavor, candidates are taken in order (other borrowing queues first, then lowest
// priority, then most recently admitted, then key) until the workload fits, then
// victims that turn out unnecessary are put back (latest first). A workload that
// would still not fit after evicting every allowed candidate preempts nothing.
//
// It also returns the flavor index per resource group the plan relies on (-1: group
// not requested).
func (pre *preemption) planPreemption(c *cqState, w *wl) ([]victim, []int, bool) {
	if c.spec == nil || !pre.canPreempt(c) {
		return nil, nil, false
	}
	var removed []victim
	defer func() {
		for _, v := range removed {
			v.cq.charge(v.w.usage, 1)
		}
	}()
	flavors := make([]int, len(c.groups))
	for gi := range c.groups {
		flavors[gi] = -1
		if !requestsGroup(c, w, gi) {
			continue
		}
		if flavors[gi] = chooseFlavor(c, w, gi); flavors[gi] >= 0 {
			continue
		}
		ok := false
		for fi := range c.groups[gi].flavors {
			if removed, ok = pre.tryFlavor(c, w, gi, fi, removed); ok {
				flavors[gi] = fi
				break
			}
		}
		if !ok {
			return nil, nil, false
		}
	}
	return slices.Clone(removed), flavors, len(removed) > 0
}

// claim holds, for a preemptor that now waits for its victims, the free quota its
// plan counted on besides what the victims will free: charged to its queue as held
// quota (a ghost) so that nothing admitted meanwhile — by its own queue or by the
// cohort — can take it. Without the claim, work admitted in the same cycle could use
// that free quota, the preemptor would still not fit once the victims are gone and
// would preempt again: a loop FuzzConvergence found. What the victims free is
// measured, not assumed: a victim of another queue frees for the preemptor only
// the part of its usage its queue borrowed, not what the queue keeps for itself
// (counting all of it, the claim fell short, another preemptor served first took
// the rest, and the preemptor did not fit: found by the preemptor check of
// FuzzConvergence). The claim never exceeds what is available now, because the
// preemptor fits once the victims are removed.
func (pre *preemption) claim(c *cqState, w *wl, vs []victim, flavors []int) {
	keys := make([]frKey, len(w.req))
	now := make([]int64, len(w.req))
	for i, r := range w.req {
		keys[i] = makeFR(c.groups[c.resGroup[r.res]].flavors[flavors[c.resGroup[r.res]]].id, r.res)
		now[i] = c.available(keys[i])
	}
	for _, v := range vs {
		v.cq.charge(v.w.usage, -1)
	}
	var held []frAmt
	for i, r := range w.req {
		freed := c.available(keys[i]) - now[i]
		if need := min(r.amt-freed, now[i]); need > 0 {
			held = append(held, frAmt{fr: keys[i], amt: need})
		}
	}
	for _, v := range vs {
		v.cq.charge(v.w.usage, 1)
	}
	if len(held) == 0 {
		return
	}
	c.charge(held, 1)
	w.ghosts = append(w.ghosts, ghost{cq: c.name, usage: held})
	pre.fair.rekey(c)
}

func requestsGroup(c *cqState, w *wl, gi int) bool {
	for _, r := range w.req {
		if c.resGroup[r.res] == gi {
			return true
		}
	}
	return false
}

// tryFlavor extends removed with victims that make group gi fit flavor fi. On failure
// it reverts its own additions and returns removed unchanged in content.
func (pre *preemption) tryFlavor(c *cqState, w *wl, gi, fi int, removed []victim) ([]victim, bool) {
	f := c.groups[gi].flavors[fi].id
	if !withinMax(c, w, gi, f) {
		return removed, false
	}
	mark := len(removed)
	for _, v := range pre.candidates(c, w, gi, f) {
		if slices.ContainsFunc(removed, func(x victim) bool { return x.w == v.w }) {
			continue // already a victim for an earlier resource group: removed once
		}
		if !pre.ruleHolds(c, w, gi, f, &v, true) || !pre.freesFully(c, v, removed) {
			continue
		}
		v.cq.charge(v.w.usage, -1)
		removed = append(removed, v)
		if fits, _ := c.fitsFlavor(w, gi, f); fits {
			return pre.minimize(c, w, gi, f, removed, mark), true
		}
	}
	for _, v := range removed[mark:] {
		v.cq.charge(v.w.usage, 1)
	}
	return removed[:mark], false
}

// minimize puts back victims (latest first) that are not needed for w to fit, as long
// as every remaining victim's rule still holds.
func (pre *preemption) minimize(c *cqState, w *wl, gi int, f int32, removed []victim, mark int) []victim {
	for i := len(removed) - 1; i >= mark; i-- {
		v := removed[i]
		v.cq.charge(v.w.usage, 1)
		keep := false
		if fits, _ := c.fitsFlavor(w, gi, f); !fits {
			keep = true
		} else {
			for j := mark; j < len(removed); j++ {
				if j != i && !pre.ruleHolds(c, w, gi, f, &removed[j], false) {
					keep = true
					break
				}
			}
		}
		if keep {
			v.cq.charge(v.w.usage, -1)
			continue
		}
		removed = slices.Delete(removed, i, i+1)
	}
	return removed
}

// candidates lists admitted (confirmed, not already evicting) workloads that use a
// (flavor, resource) w needs in group gi and whose priority the policy allows, in
// preemption order. The rule is decided per candidate by ruleHolds.
func (pre *preemption) candidates(c *cqState, w *wl, gi int, f int32) []victim {
	var out []victim
	p := c.spec.Preemption
	if isOn(p.WithinClusterQueue) {
		c.admitted.ascend(func(v *wl) bool {
			if !priorityAllows(p.WithinClusterQueue, w, v) {
				return v.prio <= w.prio
			}
			if eligible(v) && usesGroupFlavor(c, v, w, gi, f) {
				out = append(out, victim{w: v, cq: c, reason: InClusterQueue})
			}
			return true
		})
	}
	if c.cohort != nil {
		out = append(out, pre.cohortCandidates(c, w, gi, f)...)
	}
	slices.SortStableFunc(out, func(a, b victim) int {
		if (a.cq == c) != (b.cq == c) {
			if a.cq == c {
				return 1
			}
			return -1
		}
		if lessVictim(a.w, b.w) {
			return -1
		}
		if lessVictim(b.w, a.w) {
			return 1
		}
		return 0
	})
	return out
}

func (pre *preemption) cohortCandidates(c *cqState, w *wl, gi int, f int32) []victim {
	reclaim := c.spec.Preemption.ReclaimWithinCohort
	fair := PreemptionMode("")
	if pre.opts.FairSharing {
		fair = fairMode(c)
	}
	if !isOn(reclaim) && !isOn(fair) {
		return nil
	}
	names := make([]string, 0, len(c.cohort.members))
	for n := range c.cohort.members {
		if n != c.name {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []victim
	for _, n := range names {
		d := c.cohort.members[n]
		d.admitted.ascend(func(v *wl) bool {
			if (priorityAllows(reclaim, w, v) || priorityAllows(fair, w, v)) && eligible(v) && usesGroupFlavor(c, v, w, gi, f) {
				out = append(out, victim{w: v, cq: d})
			}
			return true
		})
	}
	return out
}

func eligible(v *wl) bool {
	// One being evicted for another reason (a drain, a deactivation) is
	// going already: evicted twice, it would be written twice.
	return v.phase == phaseAdmitted && !v.evicting && v.deciding == 0 && v.evictedAs == ""
}

func priorityAllows(m PreemptionMode, w, v *wl) bool {
	switch m {
	case PreemptLowerPriority:
		return v.prio < w.prio
	case PreemptLowerOrNewerEqualPriority:
		return v.prio < w.prio || (v.prio == w.prio && v.created > w.created)
	case PreemptAny:
		return true
	}
	return false
}

// usesGroupFlavor reports whether v uses flavor f for a resource w requests in gi.
func usesGroupFlavor(c *cqState, v, w *wl, gi int, f int32) bool {
	for _, u := range v.usage {
		if u.fr.flavor() != f {
			continue
		}
		for _, r := range w.req {
			if r.res == u.fr.res() && c.resGroup[r.res] == gi {
				return true
			}
		}
	}
	return false
}

// ruleHolds checks, on the current what-if state, the rule under which v may be
// preempted, and sets v.reason. before: v's usage is still counted (v not yet
// removed); otherwise v is removed.
func (pre *preemption) ruleHolds(c *cqState, w *wl, gi int, f int32, v *victim, before bool) bool {
	if v.cq == c {
		v.reason = InClusterQueue
		return true
	}
	borrowed := false // was v's queue borrowing on a contested resource with v counted?
	for _, r := range w.req {
		if c.resGroup[r.res] != gi {
			continue
		}
		k := makeFR(f, r.res)
		withV := v.cq.usage[k]
		if !before {
			withV += usageOf(v.w, k)
		}
		borrowed = borrowed || withV > v.cq.quota[k].nominal
	}
	if !borrowed {
		return false
	}
	if priorityAllows(c.spec.Preemption.ReclaimWithinCohort, w, v.w) && withinNominalAfter(c, w, gi, f) {
		v.reason = InCohortReclamation
		return true
	}
	if !pre.opts.FairSharing || !priorityAllows(fairMode(c), w, v.w) {
		return false
	}
	if before {
		v.cq.charge(v.w.usage, -1)
	}
	victimShare := v.cq.drs()
	if before {
		v.cq.charge(v.w.usage, 1)
	}
	v.reason = InCohortFairSharing
	return shareAfterAdmit(c, w, gi, f) < victimShare
}

func usageOf(w *wl, k frKey) int64 {
	for _, u := range w.usage {
		if u.fr == k {
			return u.amt
		}
	}
	return 0
}

// withinNominalAfter reports whether c stays within its nominal quota of flavor f
// for the resources of group gi once w is admitted.
func withinNominalAfter(c *cqState, w *wl, gi int, f int32) bool {
	for _, r := range w.req {
		if c.resGroup[r.res] == gi {
			k := makeFR(f, r.res)
			if c.usage[k]+r.amt > c.quota[k].nominal {
				return false
			}
		}
	}
	return true
}

func victimKeys(vs []WorkloadKey) string {
	parts := make([]string, len(vs))
	for i, k := range vs {
		parts[i] = k.String()
	}
	return strings.Join(parts, ", ")
}
