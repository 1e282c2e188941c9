package admission

import "math/bits"

// Fair sharing between the LocalQueues of one ClusterQueue (Options.
// LocalQueueFairSharing) is start-time fair queueing (Goyal, Vin and Cheng,
// SIGCOMM 1996) over the queue's pending order:
//
//   - each ClusterQueue keeps a virtual time V: the largest start tag of any
//     workload it admitted;
//   - each LocalQueue l keeps F(l), the finish tag of the last workload it queued;
//   - a workload w queued in l gets the start tag S(w) = max(V, F(l)), and F(l)
//     becomes S(w) + cost(w) / weight(l);
//   - pending workloads are ordered by priority, then start tag, then creation time.
//
// cost(w) is w's dominant share of the ClusterQueue's nominal quota (its largest
// request as a fraction of the quota of that resource over all flavors). So a
// LocalQueue that queues a thousand workloads at once gets tags far in the virtual
// future, and one that queues a single workload later gets a tag at V: it is served
// next, not after the thousand. An idle LocalQueue earns no credit (max with V).
//
// The tag is computed once, when the workload is queued, and never changes while it
// waits, so it is part of the B-tree order like priority and creation time and needs
// no re-keying when usage changes — the cost of the option is one map lookup per
// queued workload. A workload that is evicted or rolled back keeps its tag (it
// returns to its place, as without the option); a workload moved to another
// LocalQueue or ClusterQueue is queued anew.
//
// Tags are not persisted: after a restart the controller loads workloads in
// creation order and the tags start again from zero.

const (
	// shareUnit is a share of 1 (the whole nominal quota) in tag units.
	shareUnit = 1_000_000
	// maxShare caps one workload's cost so that tags cannot overflow: 100 times the
	// queue's nominal quota costs as much as any larger request.
	maxShare = 100 * shareUnit
	// defaultLQWeight is weight 1 in milli-units.
	defaultLQWeight = 1000
)

// lqKey names a LocalQueue: LocalQueue names are unique per namespace only.
type lqKey struct{ namespace, name string }

// share is w's dominant share of c's nominal quota in tag units (shareUnit = all
// of it), at most maxShare, counting the flavors open to w (flavormatch.go). A
// queue that has no such nominal quota for any resource w requests (it only
// borrows) counts every workload as one share.
func (c *cqState) share(w *wl) int64 {
	var best int64
	known := false
	for _, r := range w.req {
		gi, ok := c.resGroup[r.res]
		if !ok {
			continue
		}
		var nominal int64
		for _, f := range c.groups[gi].flavors {
			if f.openTo(c, w, gi) {
				nominal += c.quota[makeFR(f.id, r.res)].nominal
			}
		}
		if nominal <= 0 {
			continue
		}
		known = true
		best = max(best, scaledRatio(r.amt, nominal))
	}
	if !known {
		return shareUnit
	}
	return best
}

// scaledRatio returns amt*shareUnit/nominal rounded up, capped at maxShare, in
// integer arithmetic (amounts go up to MaxAmount, so the product needs 128 bits).
func scaledRatio(amt, nominal int64) int64 {
	hi, lo := bits.Mul64(uint64(amt), shareUnit)
	if hi >= uint64(nominal) {
		return maxShare
	}
	q, rem := bits.Div64(hi, lo, uint64(nominal))
	if rem != 0 {
		q++
	}
	return int64(min(q, maxShare))
}

// noteAdmitted advances c's virtual time to the start tag of a workload it admits.
func (c *cqState) noteAdmitted(w *wl) {
	w.prevV = c.vtime
	c.vtime = max(c.vtime, w.vstart)
}
