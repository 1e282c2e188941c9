package scheduler

import "github.com/berth-dev/berth/admission"

// explanations keeps the visibility API's explanations of pending
// workloads until the next admission cycle. Explaining a workload (its fit
// and the preemption what-if) needs the engine, so it holds the admission
// lock; without the cache every lookup of a long line would explain it all
// again, and a tenant polling its backlog would add that much lock time to
// every cycle. With it, each pending workload is explained at most once
// per cycle whoever asks and however often: what a page shows is as of the
// last cycle, which is also when the engine last changed its mind about
// any of them (a change to a queue or a workload asks for a cycle).
// Positions and the fair-share standing are not cached: they come from the
// fresh walk of the queue each request makes.
type explanations struct {
	byKey map[admission.WorkloadKey]admission.Explanation
}

// reset forgets every explanation: a cycle ran.
func (c *explanations) reset() { clear(c.byKey) }

// explain returns the item explained, from the cache when this cycle
// explained it already, and false when the workload is no longer pending.
// The caller holds the engine's lock.
func (c *explanations) explain(e *admission.Engine, item admission.PendingWorkload, fs admission.FairShare) (admission.PendingWorkload, bool) {
	if ex, ok := c.byKey[item.Key]; ok && e.IsPending(item.Key) {
		ex.Position, ex.FairShare = item.PositionInClusterQueue, fs
		item.Explanation = ex
		return item, true
	}
	item, ok := e.ExplainPending(item, fs)
	if !ok {
		return item, false
	}
	if c.byKey == nil {
		c.byKey = map[admission.WorkloadKey]admission.Explanation{}
	}
	c.byKey[item.Key] = item.Explanation
	return item, true
}
