package admission

import (
	"math"
	"math/bits"
)

// A release of quota in a cohort wakes its members: any of them may use what
// was freed. In a busy cohort most are woken for nothing — the first few
// served take what was freed, and every later one finds its parked
// workloads still too large. A cycle takes only the members whose wake need
// the release could meet (wakeorder.go); of those, the cohort also keeps a
// summary of what its members park: per resource, how many parked workloads
// fall in each size bucket. While what the cohort has free, plus the most
// any member holds of its own guaranteed quota, is below the smallest parked
// request for every resource, no member woken only by a release can admit
// anything, and the cycle passes over it without serving it
// (Engine.spentWake).
//
// The test is conservative: it ignores borrowing limits (which only lower
// what a member may take) and bounds a bucket's smallest request from below,
// so it never passes over a member that serving would admit or make fresh.

// parkedSizes counts a cohort's parked workloads of one resource by size
// bucket (bucketKey of the request they are parked under).
type parkedSizes struct {
	n map[int64]int32
	// least is the smallest bucket key with a count, or 0 when it must be
	// found again (after the last workload of that bucket left).
	least int64
}

// cohortKey is one (flavor, resource) some member of a cohort has quota
// for, and the largest guaranteed (non-lendable) quota a member has of it.
type cohortKey struct {
	k         frKey
	guarantee int64
}

// addParked counts n more (or fewer) parked workloads of resource res in
// bucket key.
func (co *cohortState) addParked(res int32, key int64, n int32) {
	if co.parked == nil {
		co.parked = map[int32]*parkedSizes{}
	}
	ps := co.parked[res]
	if ps == nil {
		ps = &parkedSizes{n: map[int64]int32{}}
		co.parked[res] = ps
	}
	left := ps.n[key] + n
	switch {
	case left > 0:
		ps.n[key] = left
		if ps.least != 0 && key < ps.least {
			ps.least = key
		}
	case len(ps.n) == 1:
		delete(co.parked, res)
	default:
		delete(ps.n, key)
		if key == ps.least {
			ps.least = 0
		}
	}
}

// smallest is a lower bound of every request parked under resource res in
// the cohort, or false when none is.
func (co *cohortState) smallest(res int32) (int64, bool) {
	ps := co.parked[res]
	if ps == nil {
		return 0, false
	}
	if ps.least == 0 {
		ps.least = math.MaxInt64
		for key := range ps.n {
			ps.least = min(ps.least, key)
		}
	}
	return bucketFloor(ps.least), true
}

// bucketFloor is a lower bound of the amounts bucketKey maps to key: an
// amount below key has at most bits.Len(key-1) bits, so its bucket spans
// less than 1<<(bits.Len(key-1)-3) below the key.
func bucketFloor(key int64) int64 {
	if key <= 8 {
		return key
	}
	return key - int64(1)<<(bits.Len64(uint64(key-1))-3) + 1
}

// countParked adds (sign 1) or removes (sign -1) every workload the queue
// parks to or from its cohort's summary, when it joins or leaves it.
func (co *cohortState) countParked(c *cqState, sign int32) {
	for res, t := range c.parked {
		t.Ascend(func(b *parkBucket) bool {
			co.addParked(res, b.key, sign*int32(b.items.len()))
			return true
		})
	}
}

// recomputeKeys lists, per resource, the (flavor, resource) pairs the
// members have quota for with the largest guarantee among them. Paid when a
// ClusterQueue spec or the membership changes, like the pool.
func (co *cohortState) recomputeKeys() {
	guarantee := map[frKey]int64{}
	for _, m := range co.members {
		for k, q := range m.quota {
			guarantee[k] = max(guarantee[k], q.guaranteed)
		}
	}
	co.keys = map[int32][]cohortKey{}
	for k, g := range guarantee {
		co.keys[k.res()] = append(co.keys[k.res()], cohortKey{k: k, guarantee: g})
	}
}

// spent reports whether no member can admit a parked workload with what
// the cohort has free now (see the comment at the top of this file).
func (co *cohortState) spent() bool {
	for res := range co.parked {
		least, _ := co.smallest(res)
		for _, ck := range co.keys[res] {
			if max(0, co.pool[ck.k]-co.used[ck.k])+ck.guarantee >= least {
				return false
			}
		}
	}
	return true
}

// spentWake reports whether serving c would do nothing: it was only woken
// by released capacity (no fresh workload, no parked one already live),
// and its cohort has too little free for anything it parks. A StrictFIFO
// queue whose head is not parked is always served: the release makes that
// head fresh.
func (e *Engine) spentWake(c *cqState) bool {
	if e.opts.wakeWholeCohort || c.cohort == nil || c.refresh != refreshCapacity || c.fresh.len() > 0 || c.parkedLive {
		return false
	}
	if c.strict() {
		if h, ok := c.pending.min(); ok && h.parkRes < 0 {
			return false
		}
	}
	return c.cohort.spent()
}
