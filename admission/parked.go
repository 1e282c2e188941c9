package admission

import (
	"math"
	"math/bits"

	"github.com/google/btree"
)

// queueOrder is the order within a ClusterQueue: which pending workloads a
// cycle tries (fresh ones, parked ones that capacity released could let in),
// StrictFIFO's blocking head, BestEffortFIFO's skipped heads and the
// reservation a starving head makes. A cycle's bookkeeping of what to park,
// refresh or lift when it ends lives here too; the Engine ends the cycle.
type queueOrder struct {
	opts  *Options
	clock *clock
	fair  *fairSharing
	// wlFree and bucketFree are the node free lists shared by all indexes.
	wlFree     *btree.FreeListG[*wl]
	bucketFree *btree.FreeListG[*parkBucket]
	// deferred queues lift their head reservation at the end of the running cycle.
	deferred []*cqState
	// live lists queues whose parked workloads are candidates in the running cycle.
	live []*cqState
	// toPark lists workloads that did not fit in the running cycle; they are parked
	// when it ends, so that a cycle never tries the same workload twice.
	toPark []*wl
	// freshLater are made fresh again at the end of the running cycle.
	freshLater []*wl
	// probe is the reused lookup key of the parked buckets.
	probe parkBucket
}

// refreshLevel says which pending workloads of a queue must be re-evaluated.
type refreshLevel uint8

const (
	// refreshNone: only workloads in the fresh set.
	refreshNone refreshLevel = iota
	// refreshCapacity: capacity was released in the queue or its cohort: parked
	// workloads whose request could now fit are candidates again (see parkedNext).
	refreshCapacity
	// refreshAll: the spec, the cohort or the queue's head reservation changed: every
	// pending workload is fresh.
	refreshAll
)

// parkBucket holds parked workloads whose constraining request falls in one size
// bucket, in queue order.
type parkBucket struct {
	key int64 // upper bound of the bucket (inclusive)
	// low is a lower bound of the amounts in the bucket: exact after insertions and
	// after a scan, possibly too low after deletions (which only costs a scan).
	low   int64
	items workloadIndex
}

func lessBucket(a, b *parkBucket) bool { return a.key < b.key }

// parkedIndex holds the queue's workloads that did not fit for lack of quota. Each is
// parked under the resource it needs most relative to what the queue could ever get
// of it, in a size bucket of that request (4 buckets per power of two), in queue
// order within the bucket. While that request exceeds what is available of the
// resource in every flavor the workload cannot fit, so:
//
//   - without released capacity a parked workload is never looked at;
//   - after a release, the next candidate in queue order among those that might fit
//     is the minimum of the heads of the buckets below the available amount (plus a
//     scan of the one bucket that straddles it), found in O(buckets), and it is
//     looked up again after every admission, against the then available amount.
//
// This keeps a BestEffortFIFO queue's re-evaluation after a release proportional to
// the workloads that might fit and are tried, not to the queue's length.
type parkedIndex map[int32]*btree.BTreeG[*parkBucket]

// bucketKey rounds amt up to 3 significant bits.
func bucketKey(amt int64) int64 {
	if amt <= 8 {
		return amt
	}
	shift := bits.Len64(uint64(amt)) - 3
	return ((amt-1)>>shift + 1) << shift
}

// park records that w did not fit for lack of quota. It returns false if w requests
// a resource the queue does not cover (then it is not parked).
func (order *queueOrder) park(c *cqState, w *wl) bool {
	order.unpark(c, w)
	best, bestRatio := int32(-1), -1.0
	for _, r := range w.req {
		gi, ok := c.resGroup[r.res]
		if !ok {
			return false
		}
		var most int64
		for _, f := range c.groups[gi].flavors {
			most = max(most, c.maxAvailable(makeFR(f.id, r.res)))
		}
		ratio := float64(r.amt) / float64(max(most, 1))
		if ratio > bestRatio {
			best, bestRatio = r.res, ratio
		}
	}
	if best < 0 {
		return false
	}
	t, ok := c.parked[best]
	if !ok {
		t = btree.NewWithFreeListG(4, lessBucket, order.bucketFree)
		c.parked[best] = t
	}
	w.parkRes, w.parkAmt = best, amountOf(w.req, best)
	b, ok := t.Get(order.probeFor(w.parkAmt))
	if !ok {
		b = &parkBucket{key: bucketKey(w.parkAmt)}
		b.low = w.parkAmt
		b.items = newWorkloadIndex(lessPending, order.wlFree)
		t.ReplaceOrInsert(b)
	}
	b.low = min(b.low, w.parkAmt)
	b.items.insert(w)
	if c.cohort != nil {
		c.cohort.addParked(best, b.key, 1)
	}
	order.fair.markNeed(c)
	return true
}

// probeFor returns the reused key of the bucket amt falls in, for lookups:
// a fresh one per lookup would be an allocation per park and unpark.
func (order *queueOrder) probeFor(amt int64) *parkBucket {
	order.probe.key = bucketKey(amt)
	return &order.probe
}

// unpark removes w from the parked index and the reserved set, if it is there.
func (order *queueOrder) unpark(c *cqState, w *wl) {
	if w.held {
		c.reserved.remove(w)
		w.held = false
	}
	if w.parkRes < 0 {
		return
	}
	if t, ok := c.parked[w.parkRes]; ok {
		if b, ok := t.Get(order.probeFor(w.parkAmt)); ok {
			b.items.remove(w)
			if c.cohort != nil {
				c.cohort.addParked(w.parkRes, b.key, -1)
			}
			if b.items.len() == 0 {
				t.Delete(b)
				if t.Len() == 0 {
					delete(c.parked, w.parkRes)
				}
			}
		}
	}
	w.parkRes = -1
}

func amountOf(req []resAmt, res int32) int64 {
	for _, r := range req {
		if r.res == res {
			return r.amt
		}
	}
	return 0
}

// makeFresh moves a pending workload from the parked index (if there) to the fresh
// set.
func (order *queueOrder) makeFresh(c *cqState, w *wl) {
	order.unpark(c, w)
	c.fresh.insert(w)
	order.fair.markOwn(c)
	order.fair.markNeed(c)
}

// refresh applies the queue's refresh level when the queue is first served in a
// cycle.
func (order *queueOrder) refresh(c *cqState) {
	switch c.refresh {
	case refreshAll:
		if c.cohort != nil {
			c.cohort.countParked(c, -1)
		}
		for _, t := range c.parked {
			t.Ascend(func(b *parkBucket) bool {
				b.items.ascend(func(w *wl) bool { w.parkRes = -1; return true })
				return true
			})
		}
		clear(c.parked)
		c.reserved.ascend(func(w *wl) bool { w.held = false; return true })
		c.reserved.t.Clear(false)
		c.fresh = c.pending.clone()
	case refreshCapacity:
		if c.strict() {
			if h, ok := c.pending.min(); ok && (h.parkRes < 0 || h.parkAmt <= bestAvailable(c, h.parkRes)) {
				order.makeFresh(c, h)
			}
		} else if len(c.parked) > 0 {
			c.parkedLive = true
			order.live = append(order.live, c)
		}
	}
	c.refresh = refreshNone
}

// parkedNext returns the first parked workload, in queue order, whose constraining
// request does not exceed what the queue can get of that resource now, or nil.
func (order *queueOrder) parkedNext(c *cqState) *wl {
	var best *wl
	// While the head reserves, parked workloads that share its constraining resource
	// would only be found ReservedForHead: leave them parked (their status is not
	// re-evaluated until the reservation lifts) and consider only the head itself.
	var reserve *wl
	if head, ok := c.pending.min(); ok && order.reserving(c, head) {
		if head.parkRes >= 0 && head.parkAmt <= bestAvailable(c, head.parkRes) {
			return head
		}
		reserve = head
	}
	// The result is the minimum in a total order, so map order does not matter.
	for r, t := range c.parked {
		if reserve != nil && amountOf(reserve.req, r) > 0 {
			continue
		}
		first, _ := t.Min()
		avail := bestAvailable(c, r)
		if first.low > avail {
			continue // nothing parked under r could fit (the common case)
		}
		t.Ascend(func(b *parkBucket) bool {
			if b.key <= avail {
				if w, _ := b.items.min(); best == nil || lessPending(w, best) {
					best = w
				}
				return true
			}
			if b.low > avail {
				return false
			}
			low := int64(math.MaxInt64) // the bucket straddles avail: scan it
			b.items.ascend(func(w *wl) bool {
				if best != nil && lessPending(best, w) {
					low = b.low // scan cut short: keep the old bound
					return false
				}
				if w.parkAmt <= avail {
					best, low = w, b.low
					return false
				}
				low = min(low, w.parkAmt)
				return true
			})
			b.low = low
			return false
		})
	}
	return best
}

// bestAvailable is the most the queue can get of resource r now in any flavor.
func bestAvailable(c *cqState, r int32) int64 {
	gi, ok := c.resGroup[r]
	if !ok {
		return 0
	}
	var avail int64
	for _, f := range c.groups[gi].flavors {
		avail = max(avail, c.available(makeFR(f.id, r)))
	}
	return avail
}
