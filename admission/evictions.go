package admission

import (
	"fmt"
	"maps"
	"slices"
)

// Evictions: besides preemptions and failed bookings, the engine decides every
// other eviction of an admitted workload from facts the caller feeds it — the
// workload was deactivated (Workload.Inactive), its LocalQueue or ClusterQueue
// is stopped with HoldAndDrain (Workload.LocalQueueState, ClusterQueue.Drain),
// or its job changed under it (ReportChange) — and returns each once in
// Result.Evictions. The engine keeps the workload's usage until it is upserted
// without Admission (the eviction is over) or deleted; a write that fails is
// given back with Rollback, and decided again.

// EvictionReason says why an admitted workload is evicted. The strings are the
// API's reasons.
type EvictionReason string

const (
	// EvictDeactivated means the workload was deactivated.
	EvictDeactivated EvictionReason = "Deactivated"
	// EvictClusterQueueStopped means its ClusterQueue is stopped with HoldAndDrain.
	EvictClusterQueueStopped EvictionReason = "ClusterQueueStopped"
	// EvictLocalQueueStopped means its LocalQueue is stopped with HoldAndDrain.
	EvictLocalQueueStopped EvictionReason = "LocalQueueStopped"
	// EvictResized means its job changed size or placement after admission.
	EvictResized EvictionReason = "Resized"
	// EvictInvalidSpec means its running job can no longer be read as a gang.
	EvictInvalidSpec EvictionReason = "InvalidSpec"
)

// ChangeKind says how the job of an admitted workload changed (ReportChange).
type ChangeKind uint8

const (
	// ChangeGrew means the started job grew (more pods, or larger requests):
	// Detail describes the first growth.
	ChangeGrew ChangeKind = iota + 1
	// ChangeMoved means the pod template of a started pod set changed where its
	// pods may run: Detail names the pod set.
	ChangeMoved
	// ChangeBeforeStart means the admitted job changed before it started.
	ChangeBeforeStart
	// ChangeInvalid means the running job can no longer be read as a gang:
	// Detail says why.
	ChangeInvalid
)

// Change is what the caller found changed in the job of an admitted workload.
type Change struct {
	Kind   ChangeKind
	Detail string
}

// Eviction asks the caller to evict an admitted workload.
type Eviction struct {
	// Key of the workload to evict.
	Key WorkloadKey
	// Reason is a stable identifier.
	Reason EvictionReason
	// Message is human-readable and deterministic.
	Message string
	// Change is the reported change that decided a Resized or InvalidSpec
	// eviction (zero otherwise), for the caller's events.
	Change Change `json:",omitzero"`
}

// wlEviction is a workload's eviction facts, and the eviction decided for it
// and not yet over.
type wlEviction struct {
	inactive bool
	lqState  LocalQueueState
	// inEviction: the caller says an eviction is written and in progress.
	inEviction bool
	// evictedAs is the reason of the eviction returned by Cycle, until the
	// workload is upserted without Admission or the decision is rolled back.
	evictedAs EvictionReason
}

// evictions holds the reported changes and the workloads to look at.
type evictions struct {
	changes map[WorkloadKey]Change
	// dirty are the workloads whose facts, reports or decisions changed.
	dirty map[WorkloadKey]struct{}
	// drained are ClusterQueues upserted with Drain since the last cycle.
	drained map[string]struct{}
}

func newEvictions() *evictions {
	return &evictions{changes: map[WorkloadKey]Change{}, dirty: map[WorkloadKey]struct{}{}, drained: map[string]struct{}{}}
}

// ReportChange records that the job of an admitted workload changed under its
// admission; the next Cycle evicts it. A report about a workload that is not
// admitted is about an admission that is over, and ignored; a report lasts until
// the workload is upserted without Admission or deleted.
func (e *Engine) ReportChange(key WorkloadKey, c Change) {
	w, ok := e.workloads[key]
	if !ok || w.phase == phasePending {
		return
	}
	e.evict.changes[key] = c
	e.evict.dirty[key] = struct{}{}
}

// takeEvictionFacts takes an upsert's eviction facts onto the workload it left in
// the engine, unless the upsert was a stale event the engine ignored.
func (e *Engine) takeEvictionFacts(in *Workload) {
	if w, ok := e.workloads[in.Key]; ok && (in.Admission != nil || w.phase == phasePending) {
		e.evictionFacts(w, in)
	}
}

// evictionFacts takes an upsert's eviction facts onto w and marks it to be looked
// at when they may evict it.
func (e *Engine) evictionFacts(w *wl, in *Workload) {
	w.inactive, w.lqState, w.inEviction = in.Inactive, in.LocalQueueState, in.Evicting
	if in.Admission == nil {
		w.evictedAs = ""
		delete(e.evict.changes, w.key)
		return
	}
	_, reported := e.evict.changes[w.key]
	if w.inactive || w.lqState == LocalQueueHoldAndDrain || reported || e.drains(in.Admission.ClusterQueue) {
		e.evict.dirty[w.key] = struct{}{}
	}
}

// drains reports whether the named ClusterQueue is stopped with HoldAndDrain.
func (e *Engine) drains(name string) bool {
	c, ok := e.queues.cqs[name]
	return ok && c.spec != nil && c.spec.Drain
}

// decideEvictions adds the evictions due to res, in key order.
func (e *Engine) decideEvictions(res *Result) {
	if len(e.evict.drained) > 0 {
		for _, w := range e.workloads {
			if _, ok := e.evict.drained[w.admCQ]; ok && w.phase == phaseAdmitted {
				e.evict.dirty[w.key] = struct{}{}
			}
		}
		clear(e.evict.drained)
	}
	if len(e.evict.dirty) == 0 {
		return
	}
	for _, k := range slices.SortedFunc(maps.Keys(e.evict.dirty), cmpKey) {
		w, ok := e.workloads[k]
		// One eviction at a time: a preemption or a failed booking being
		// written, or an eviction in progress, goes first.
		if !ok || w.phase != phaseAdmitted || w.evicting || w.deciding != 0 || w.inEviction || w.evictedAs != "" {
			continue
		}
		if ev, due := e.evictionOf(w); due {
			w.evictedAs = ev.Reason
			res.Evictions = append(res.Evictions, ev)
		}
	}
	clear(e.evict.dirty)
}

// evictionOf is the eviction an admitted workload's facts call for, if any.
func (e *Engine) evictionOf(w *wl) (Eviction, bool) {
	ev := Eviction{Key: w.key}
	switch {
	case w.inactive:
		ev.Reason, ev.Message = EvictDeactivated, "the Workload was deactivated (spec.active is false)"
	case e.drains(w.admCQ):
		ev.Reason, ev.Message = EvictClusterQueueStopped, fmt.Sprintf("ClusterQueue %s is stopped with stopPolicy HoldAndDrain", w.admCQ)
	case w.lqState == LocalQueueHoldAndDrain:
		ev.Reason, ev.Message = EvictLocalQueueStopped, fmt.Sprintf("LocalQueue %s is stopped with stopPolicy HoldAndDrain", w.lq)
	default:
		c, ok := e.evict.changes[w.key]
		if !ok {
			return Eviction{}, false
		}
		ev.Change = c
		ev.Reason, ev.Message = changeEviction(c)
	}
	return ev, true
}

// changeEviction is the reason and message of an eviction for a changed job.
func changeEviction(c Change) (EvictionReason, string) {
	switch c.Kind {
	case ChangeGrew:
		return EvictResized, "the job grew (" + c.Detail + "): it is stopped and queued again for its new size"
	case ChangeMoved:
		return EvictResized, "the pod template of pod set " + c.Detail + " changed where its pods may run: the job is stopped and queued again as it is now"
	case ChangeInvalid:
		return EvictInvalidSpec, "the running job can no longer be queued as it is (" + c.Detail + "): it is stopped and queued again once it can be"
	}
	return EvictResized, "the job changed after it was admitted: it is queued again as it is now"
}

// rollbackEviction undoes an eviction the caller could not write: it is decided
// again in the next Cycle.
func (e *Engine) rollbackEviction(w *wl) {
	// Also after a preemption or booking decision was rolled back: an eviction
	// its facts call for was put off for it.
	w.evictedAs = ""
	if w.phase == phaseAdmitted {
		e.evict.dirty[w.key] = struct{}{}
	}
}
