package admission

import (
	"cmp"

	"github.com/google/btree"
)

// btreeDegree is the B-tree degree of every index. 16 keeps nodes within a few cache
// lines while keeping trees shallow for 10^6 items.
const btreeDegree = 16

// workloadIndex is an ordered set of workloads backed by a btree.BTreeG. Its order is
// a strict weak ordering that ends on the unique WorkloadKey, so it is total and
// deterministic. The fields it orders by must not change while a workload is in the
// index: remove, change, re-insert. Not safe for concurrent use (like the Engine).
type workloadIndex struct {
	t *btree.BTreeG[*wl]
}

// newWorkloadIndex returns an empty index. Every index of an Engine shares one node
// free list (a per-tree free list would cost 256 bytes per tree, and a queue has
// several trees plus one per parked size bucket).
func newWorkloadIndex(less btree.LessFunc[*wl], free *btree.FreeListG[*wl]) workloadIndex {
	return workloadIndex{t: btree.NewWithFreeListG(btreeDegree, less, free)}
}

func (x workloadIndex) insert(w *wl)            { x.t.ReplaceOrInsert(w) }
func (x workloadIndex) remove(w *wl) bool       { _, ok := x.t.Delete(w); return ok }
func (x workloadIndex) has(w *wl) bool          { return x.t.Has(w) }
func (x workloadIndex) len() int                { return x.t.Len() }
func (x workloadIndex) ascend(f func(*wl) bool) { x.t.Ascend(btree.ItemIteratorG[*wl](f)) }

// min returns the first workload in order, comma-ok.
func (x workloadIndex) min() (*wl, bool) { return x.t.Min() }

// clone is a lazy copy-on-write copy: O(1) now, nodes are copied when either side
// writes to them.
func (x workloadIndex) clone() workloadIndex { return workloadIndex{t: x.t.Clone()} }

// lessPending is queue order: priority descending, then LocalQueue fair-sharing
// start tag ascending (0 for all without Options.LocalQueueFairSharing), then
// creation time ascending, then key. The key makes the order total (two workloads
// created in the same nanosecond with the same priority still have one
// deterministic order).
func lessPending(a, b *wl) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.vstart != b.vstart {
		return a.vstart < b.vstart
	}
	if a.created != b.created {
		return a.created < b.created
	}
	return lessKey(a.key, b.key)
}

// lessVictim is preemption-candidate order within one ClusterQueue: lowest priority
// first, then most recently admitted first, then key.
func lessVictim(a, b *wl) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if a.admitTime != b.admitTime {
		return a.admitTime > b.admitTime
	}
	return lessKey(a.key, b.key)
}

func lessKey(a, b WorkloadKey) bool {
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c < 0
	}
	return a.Name < b.Name
}

// tenantKey is a ClusterQueue's position in the fair-share order. It is a snapshot
// taken when the queue is (re-)inserted into a tenantIndex, so the index never sees a
// key change under it.
type tenantKey struct {
	// drs is the weighted dominant resource share (0 without fair sharing).
	drs int64
	// lastAdmit is the engine-wide sequence number of the queue's latest admission:
	// among equal shares the queue served longest ago goes first (round robin).
	lastAdmit uint64
	// name makes the order total.
	name string
}

func lessTenant(a, b *cqState) bool {
	x, y := &a.tkey, &b.tkey
	if x.drs != y.drs {
		return x.drs < y.drs
	}
	if x.lastAdmit != y.lastAdmit {
		return x.lastAdmit < y.lastAdmit
	}
	return x.name < y.name
}

// tenantIndex orders ClusterQueues that have pending workloads by fair-share state:
// the queue furthest below its share first. Entries are re-keyed (remove, update
// tkey, insert) whenever the queue's usage, its cohort's lendable quota or its
// latest-admission sequence changes.
type tenantIndex struct {
	t *btree.BTreeG[*cqState]
}

func newTenantIndex() tenantIndex { return tenantIndex{t: btree.NewG(btreeDegree, lessTenant)} }

func (x tenantIndex) insert(c *cqState)      { x.t.ReplaceOrInsert(c) }
func (x tenantIndex) remove(c *cqState) bool { _, ok := x.t.Delete(c); return ok }
func (x tenantIndex) has(c *cqState) bool    { return x.t.Has(c) }
func (x tenantIndex) min() (*cqState, bool)  { return x.t.Min() }
func (x tenantIndex) clone() tenantIndex     { return tenantIndex{t: x.t.Clone()} }
func (x tenantIndex) ascend(f func(*cqState) bool) {
	x.t.Ascend(btree.ItemIteratorG[*cqState](f))
}
