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
	lqState LocalQueueState
	// evictedAs is the reason of the eviction returned by Cycle, until the
	// workload is upserted without Admission or the decision is rolled back.
	evictedAs EvictionReason
	inactive  bool
	// inEviction: the caller says an eviction is written and in progress.
	inEviction bool
}

// evictions holds the reported changes and the workloads to look at. It reads
// the Engine's workloads and the ClusterQueues' stop policies.
type evictions struct {
	workloads map[WorkloadKey]*wl
	queues    *clusterQueues
	changes   map[WorkloadKey]Change
	// dirty are the workloads whose facts, reports or decisions changed.
	dirty map[WorkloadKey]struct{}
	// drained are ClusterQueues upserted with Drain since the last cycle.
	drained map[string]struct{}
}

func newEvictions(workloads map[WorkloadKey]*wl, queues *clusterQueues) *evictions {
	return &evictions{workloads: workloads, queues: queues,
		changes: map[WorkloadKey]Change{}, dirty: map[WorkloadKey]struct{}{}, drained: map[string]struct{}{}}
}

// ReportChange records that the job of an admitted workload changed under its
// admission; the next Cycle evicts it. A report about a workload that is not
// admitted is about an admission that is over, and ignored; a report lasts until
// the workload is upserted without Admission or deleted.
func (e *Engine) ReportChange(key WorkloadKey, c Change) { e.evict.report(key, c) }

// report records a change of an admitted workload's job (ReportChange).
func (ev *evictions) report(key WorkloadKey, c Change) {
	w, ok := ev.workloads[key]
	if !ok || w.phase == phasePending {
		return
	}
	ev.changes[key] = c
	ev.dirty[key] = struct{}{}
}

// takeFacts takes an upsert's eviction facts onto the workload it left in
// the engine, unless the upsert was a stale event the engine ignored.
func (ev *evictions) takeFacts(in *Workload) {
	if w, ok := ev.workloads[in.Key]; ok && (in.Admission != nil || w.phase == phasePending) {
		ev.facts(w, in)
	}
}

// facts takes an upsert's eviction facts onto w and marks it to be looked
// at when they may evict it.
func (ev *evictions) facts(w *wl, in *Workload) {
	w.inactive, w.lqState, w.inEviction = in.Inactive, in.LocalQueueState, in.Evicting
	if in.Admission == nil {
		w.evictedAs = ""
		delete(ev.changes, w.key)
		return
	}
	_, reported := ev.changes[w.key]
	if w.inactive || w.lqState == LocalQueueHoldAndDrain || reported || ev.drains(in.Admission.ClusterQueue) {
		ev.dirty[w.key] = struct{}{}
	}
}

// drains reports whether the named ClusterQueue is stopped with HoldAndDrain.
func (ev *evictions) drains(name string) bool {
	c, ok := ev.queues.cqs[name]
	return ok && c.spec != nil && c.spec.Drain
}

// decide adds the evictions due to res, in key order.
func (ev *evictions) decide(res *Result) {
	if len(ev.drained) > 0 {
		for _, w := range ev.workloads {
			if _, ok := ev.drained[w.admCQ]; ok && w.phase == phaseAdmitted {
				ev.dirty[w.key] = struct{}{}
			}
		}
		clear(ev.drained)
	}
	if len(ev.dirty) == 0 {
		return
	}
	for _, k := range slices.SortedFunc(maps.Keys(ev.dirty), cmpKey) {
		w, ok := ev.workloads[k]
		// One eviction at a time: a preemption or a failed booking being
		// written, or an eviction in progress, goes first.
		if !ok || w.phase != phaseAdmitted || w.evicting || w.deciding != 0 || w.inEviction || w.evictedAs != "" {
			continue
		}
		if out, due := ev.of(w); due {
			w.evictedAs = out.Reason
			res.Evictions = append(res.Evictions, out)
		}
	}
	clear(ev.dirty)
}

// of is the eviction an admitted workload's facts call for, if any.
func (ev *evictions) of(w *wl) (Eviction, bool) {
	out := Eviction{Key: w.key}
	switch {
	case w.inactive:
		out.Reason, out.Message = EvictDeactivated, "the Workload was deactivated (spec.active is false)"
	case ev.drains(w.admCQ):
		out.Reason, out.Message = EvictClusterQueueStopped, fmt.Sprintf("ClusterQueue %s is stopped with stopPolicy HoldAndDrain", w.admCQ)
	case w.lqState == LocalQueueHoldAndDrain:
		out.Reason, out.Message = EvictLocalQueueStopped, fmt.Sprintf("LocalQueue %s is stopped with stopPolicy HoldAndDrain", w.lq)
	default:
		c, ok := ev.changes[w.key]
		if !ok {
			return Eviction{}, false
		}
		out.Change = c
		out.Reason, out.Message = changeEviction(c)
	}
	return out, true
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

// rollback undoes an eviction the caller could not write: it is decided
// again in the next Cycle.
func (ev *evictions) rollback(w *wl) {
	// Also after a preemption or booking decision was rolled back: an eviction
	// its facts call for was put off for it.
	w.evictedAs = ""
	if w.phase == phaseAdmitted {
		ev.dirty[w.key] = struct{}{}
	}
}
