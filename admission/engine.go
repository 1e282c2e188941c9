package admission

import (
	"fmt"
	"time"

	"github.com/google/btree"
)

// DefaultStarvationSkips is the number of cycles in which a BestEffortFIFO head may be
// skipped past (work behind it admitted while it does not fit) before the queue
// reserves for it. Used when Options.StarvationSkips is 0.
const DefaultStarvationSkips = 3

// Options configure an Engine. The zero value is valid (fair sharing off); the
// controller normally starts from DefaultOptions.
type Options struct {
	// FairSharing orders ClusterQueues by weighted dominant resource share and enables
	// fair-share preemption (PreemptionPolicy.FairSharing). Off: ClusterQueues are
	// served round robin.
	FairSharing bool
	// LocalQueueFairSharing shares each ClusterQueue between its LocalQueues by
	// start-time fair queueing: among workloads of equal priority, a LocalQueue that
	// queued much work is interleaved with one that queued little, in proportion to
	// Workload.LocalQueueWeight, instead of being served strictly by creation time
	// (see lqfair.go).
	LocalQueueFairSharing bool
	// StarvationSkips: a BestEffortFIFO head skipped past in this many cycles makes its
	// queue reserve for it. 0 means DefaultStarvationSkips; must not be negative.
	StarvationSkips int
	// StarvationAge: a BestEffortFIFO head first skipped past at least this long ago
	// makes its queue reserve for it, whatever the skip count. 0 disables the age rule.
	StarvationAge time.Duration

	// wakeWholeCohort serves every member of a cohort a release woke, and
	// takes every queue with pending work in each cycle, as the engine did
	// before it learnt to pass over members the release cannot help
	// (cohortwake.go) and to take only those it could help (wakeorder.go);
	// the fuzz targets run one engine each way and require the same
	// decisions.
	wakeWholeCohort bool
}

// DefaultOptions returns the options the controller uses unless configured otherwise.
func DefaultOptions() Options {
	return Options{FairSharing: true, StarvationSkips: DefaultStarvationSkips}
}

// Engine is the admission decision engine. It holds ClusterQueues, workloads and
// usage, and decides admissions and preemptions in Cycle.
//
// Concurrency: an Engine is not safe for concurrent use. The caller serialises every
// call (the controller owns one Engine behind one mutex or one goroutine). The engine
// starts no goroutines, reads no clock and keeps no global state.
type Engine struct {
	opts      Options
	workloads map[WorkloadKey]*wl
	// seq numbers admissions engine-wide (round robin among equal shares).
	seq uint64
	// deferredGhosts are held quotas freed at the end of the running cycle.
	deferredGhosts []ghost
	// evaluations counts calls of evaluate by cycles (for benchmarks and tests).
	evaluations uint64
	// passedOver counts queues a cycle passed over because the release that
	// woke them cannot help them (cohortwake.go; for benchmarks and tests).
	passedOver uint64
	// scratch is reused by evaluate for flavor choices (no allocation per evaluation).
	scratch []int

	// The parts the Engine sequences. Each holds its own state and the parts
	// it reads; the Engine owns the workloads and moves them between parts.
	clock  *clock         // the running cycle's number and time
	names  *names         // interned names, compiling, messages
	queues *clusterQueues // ClusterQueues and cohorts: quota, usage, queues
	order  *queueOrder    // the order within a queue: parking, heads, starvation
	fair   *fairSharing   // the order between queues (fair sharing)
	topo   *topology      // flavors' levels, nodes and pools; placement
	pre    *preemption    // victims, and preemptors waiting for them
	books  *bookings      // capacity bookings: records, answers, deadlines
	elig   *eligibility   // pending workloads that cannot be queued at all
	evict  *evictions     // evictions decided from the caller's facts
	wakes  *wakes         // waking workloads that waited for topology capacity
}

// New returns an empty Engine, or an error if opts are invalid.
func New(opts Options) (*Engine, error) {
	if opts.StarvationSkips < 0 {
		return nil, fmt.Errorf("invalid options: StarvationSkips must be >= 0, got %d", opts.StarvationSkips)
	}
	if opts.StarvationAge < 0 {
		return nil, fmt.Errorf("invalid options: StarvationAge must be >= 0, got %s", opts.StarvationAge)
	}
	if opts.StarvationSkips == 0 {
		opts.StarvationSkips = DefaultStarvationSkips
	}
	wlFree := btree.NewFreeListG[*wl](btree.DefaultFreeListSize)
	e := &Engine{opts: opts, workloads: map[WorkloadKey]*wl{}, clock: &clock{}, names: newNames()}
	e.fair = &fairSharing{opts: &e.opts, tenants: newTenantIndex(), own: newTenantIndex()}
	e.queues = &clusterQueues{cqs: map[string]*cqState{}, cohorts: map[string]*cohortState{}, fair: e.fair, wlFree: wlFree}
	e.order = &queueOrder{opts: &e.opts, clock: e.clock, fair: e.fair, wlFree: wlFree,
		bucketFree: btree.NewFreeListG[*parkBucket](btree.DefaultFreeListSize)}
	e.fair.order = e.order
	e.topo = newTopology(e.names)
	e.pre = &preemption{opts: &e.opts, names: e.names, topo: e.topo, fair: e.fair, workloads: e.workloads, queues: e.queues, order: e.order}
	e.books = newBookings(e.clock, e.workloads, e.topo)
	e.books.queues, e.books.order, e.books.fair = e.queues, e.order, e.fair
	e.elig, e.evict = newEligibility(), newEvictions(e.workloads, e.queues)
	e.wakes = &wakes{workloads: e.workloads, queues: e.queues, order: e.order, fair: e.fair, topo: e.topo, books: e.books}
	return e, nil
}

// Options returns the effective options (defaults filled in).
func (e *Engine) Options() Options { return e.opts }

// frKey is an interned (flavor, resource) pair.
type frKey uint64

func makeFR(flavor, res int32) frKey { return frKey(uint64(uint32(flavor))<<32 | uint64(uint32(res))) }
func (k frKey) flavor() int32        { return int32(uint32(k >> 32)) }
func (k frKey) res() int32           { return int32(uint32(k)) }

// resAmt is an amount of one interned resource.
type resAmt struct {
	res int32
	amt int64
}

// frAmt is an amount of one interned (flavor, resource).
type frAmt struct {
	fr  frKey
	amt int64
}

// podSetSpec is a compact copy of a PodSet (requests interned and sorted).
type podSetSpec struct {
	name  string
	count int32
	req   []resAmt
	// nodes narrows the nodes the pods may use (nil: any of the flavor's);
	// filterHash is its key hashed (flavormatch.go), 0 when it has none.
	nodes      NodeFilter
	filterHash uint64
	// apart are the pod sets (indices, itself included for one pod per
	// node) whose pods these must not share a node with; sorted.
	apart []int
	// tols are the pods' own tolerations (the flavor's are added where the
	// pod set is placed).
	tols []Toleration
}

type wlPhase uint8

const (
	phasePending wlPhase = iota
	// phaseAssumed: admitted by Cycle, not yet confirmed by an upsert with Admission.
	phaseAssumed
	// phaseAdmitted: confirmed (or rebuilt) admission.
	phaseAdmitted
)

// wl is the engine's state of one workload: its spec and admission, then one
// embedded record per concern that keeps state about it (queueing, local-queue
// fair sharing, topology, bookings, preemption), so that each concern's fields
// are declared beside the part of the engine that owns them.
type wl struct {
	key    WorkloadKey
	uid    string
	lq     string
	cqName string // queue it is pending in (Workload.ClusterQueue)
	// The fields every index orders by — prio, vstart and created (queue
	// order, lessPending), prio and admitTime (victim order, lessVictim) —
	// share one cache line: behind the 8-byte malloc header the struct's
	// bytes 56-119 are one 64-byte line of its 576-byte slot, so a
	// comparison in a B-tree of 100 workloads misses once per workload it
	// passes, not two or three times.
	prio int32
	// phase, and wlFair's tagged, sit beside prio: laid out so, the struct and
	// its 8-byte malloc header fit the allocator's 576-byte size class, not the
	// 640-byte one (TestMemoryPerPendingWorkload holds the engine to budget).
	phase     wlPhase
	tagged    bool  // LocalQueue fair sharing gave the workload its start tag (wlFair)
	filtered  bool  // a pod set has node constraints of its own (flavormatch.go)
	created   int64 // creation time, queue order's tie-break
	vstart    int64 // LocalQueue fair sharing's start tag (lqfair.go)
	admitTime int64
	podSets   []podSetSpec
	req       []resAmt // total over pod sets, sorted by resource id
	// gen is the spec's generation.
	gen int64

	adm      *Admission // phaseAssumed / phaseAdmitted; without pod sets (engineAdmission)
	admCQ    string     // queue charged with usage
	usage    []frAmt    // charged usage, sorted by frKey
	admitSeq uint64
	prevLast uint64 // the queue's lastAdmit before this admission (for Rollback)

	wlQueueing
	wlFair
	wlTopology
	wlBooking
	wlPreemption
	wlEviction
}

// wlQueueing is a workload's place in its queue: parking, holds, the last
// reported pending status and anti-starvation.
type wlQueueing struct {
	evalCycle uint64 // last cycle in which the workload was evaluated
	held      bool   // in its queue's reserved set (blocked by a reserving head)
	parkRes   int32  // resource it is parked under (-1: not parked)
	parkAmt   int64  // its request of parkRes

	// last reported pending status: the reason and a hash of the message (keeping
	// only a hash saves ~100 bytes per pending workload; it is only compared).
	reason  PendingReason
	msgHash uint64

	// anti-starvation (BestEffortFIFO heads).
	skips     int32
	skipCycle uint64
	firstSkip int64
}

// wlFair is LocalQueue fair sharing's record (lqfair.go): the LocalQueue's
// weight and the queue's virtual time before this admission (the start
// tag, wl.vstart, and whether it was given, wl.tagged, sit with the fields
// queue order reads).
type wlFair struct {
	lqWeight int64
	prevV    int64
}

// wlTopology is placement's record: the request, the capacity reserved for the
// admission, and whether the workload is listed in topology.topoWaiting.
type wlTopology struct {
	topo       *TopologyRequest
	placed     *placement
	topoWait   bool
	waitFlavor string // the flavor a TopologyUnavailable workload waits for
}

// wlBooking is the capacity bookings' record (booking.go): the record, the
// decision written and not confirmed yet (0: none); for a pending workload, no
// admission before notBefore, and the domains whose bookings failed avoided;
// backingOff: listed in bookings.backoffs.
type wlBooking struct {
	bk         *Booking
	notBefore  int64
	avoid      []TopologyAssignment
	deciding   BookingAction
	backingOff bool
}

// wlPreemption is preemption's record: a victim being evicted, or a preemptor
// waiting for its victims.
type wlPreemption struct {
	evictFor WorkloadKey
	victims  []WorkloadKey
	ghosts   []ghost // quota of evicted victims held for this preemptor
	// plannedUse is a waiting preemptor's usage where its plan puts it.
	plannedUse []frAmt
	// hold is the domain a preemptor that needs capacity preempted for, and
	// the capacity held for it (preempt_topology.go); nil for the others.
	hold      *domainHold
	evicting  bool
	preempted bool // evicted by a preemption and not admitted since: preempts nothing
}

// ghost is quota an evicted victim released, held for its preemptor.
type ghost struct {
	cq    string
	usage []frAmt
}

// cohortState aggregates the lendable quota and borrowed usage of a cohort's members.
type cohortState struct {
	name    string
	members map[string]*cqState
	// pool: Σ over members of lendable quota per (flavor, resource).
	pool map[frKey]int64
	// used: Σ over members of usage above their guaranteed (non-lendable) quota.
	used map[frKey]int64
	// parked counts the members' parked workloads by resource and size
	// bucket, and keys lists the (flavor, resource) pairs the members have
	// quota for: together they say when a release cannot help any member
	// (cohortwake.go).
	parked map[int32]*parkedSizes
	keys   map[int32][]cohortKey
	// order is the members with pending work in fair-share order, with
	// their wake needs; released: quota was released in the cohort since
	// the last cycle (wakeorder.go).
	order    []memberEntry
	released bool
}
