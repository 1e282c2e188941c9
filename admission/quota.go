package admission

import (
	"math"
	"math/bits"

	"github.com/google/btree"
)

// clusterQueues holds every ClusterQueue's state (its compiled quota, usage
// and queues of workloads) and every cohort's, and links them. A queue lives
// while it has a spec, pending or admitted workloads or usage.
type clusterQueues struct {
	fair   *fairSharing
	wlFree *btree.FreeListG[*wl]

	cqs     map[string]*cqState
	cohorts map[string]*cohortState
}

// frQuota is the compiled quota of one (flavor, resource) of a ClusterQueue.
type frQuota struct {
	nominal int64
	// borrowLimit < 0: unlimited.
	borrowLimit int64
	// lendable is min(lendingLimit, nominal) inside a cohort, 0 without one.
	lendable int64
	// guaranteed = nominal - lendable: never lent to the cohort.
	guaranteed int64
}

// flavorState is one flavor of a compiled resource group.
type flavorState struct {
	name string
	id   int32
	// nodes is the flavor's node labels, shared by every queue listing it
	// (flavormatch.go).
	nodes *flavorNodes
}

// groupState is a compiled resource group.
type groupState struct {
	resources []int32 // resource ids in CoveredResources order
	flavors   []flavorState
}

// cqState is the engine's state of one ClusterQueue name. It exists while the spec
// exists or any workload refers to the name (spec == nil: "not found").
type cqState struct {
	name     string
	spec     *ClusterQueue
	cohort   *cohortState
	groups   []groupState
	resGroup map[int32]int // resource id → group index
	quota    map[frKey]frQuota
	usage    map[frKey]int64

	pending  workloadIndex // queue order
	fresh    workloadIndex // pending workloads whose outcome may have changed
	refresh  refreshLevel  // which pending workloads must be re-evaluated
	parked   parkedIndex   // pending workloads that did not fit for lack of quota
	reserved workloadIndex // pending workloads blocked by a reserving head
	// parkedLive: capacity was released; parked workloads are candidates this cycle.
	parkedLive bool
	admitted   workloadIndex // victim order (assumed and admitted)

	tkey      tenantKey
	lastAdmit uint64
	// inOwn: the queue is in fairSharing.own. cycMark and workGen are its
	// place in a running cycle (cyclework.go); needStale: its wake need in
	// its cohort's order is to be recomputed (wakeorder.go).
	inOwn     bool
	needStale bool
	workGen   uint32
	cycMark   uint64

	// preemptors are the queue's preemptors that may still wait for their
	// victims or to be served: a later one plans on them (preempt_stack.go).
	preemptors []*wl
	// behindPreemptor are workloads of the queue that could not preempt
	// while preemptors waited: evaluated again once they are served (ride.go).
	behindPreemptor []*wl

	// vtime and lqFinish are the virtual time and per-LocalQueue finish tags of
	// LocalQueue fair sharing (lqfair.go).
	vtime    int64
	lqFinish map[lqKey]int64
}

func (c *cqState) strict() bool { return c.spec != nil && c.spec.QueueingStrategy == StrictFIFO }

func (queues *clusterQueues) cqStateFor(name string) *cqState {
	if c, ok := queues.cqs[name]; ok {
		return c
	}
	c := &cqState{
		name:     name,
		usage:    map[frKey]int64{},
		pending:  newWorkloadIndex(lessPending, queues.wlFree),
		fresh:    newWorkloadIndex(lessPending, queues.wlFree),
		admitted: newWorkloadIndex(lessVictim, queues.wlFree),
		parked:   parkedIndex{},
		reserved: newWorkloadIndex(lessPending, queues.wlFree),
		tkey:     tenantKey{name: name},
	}
	queues.cqs[name] = c
	return c
}

// maybeDropCQ forgets a queue state that has no spec and no workloads.
func (queues *clusterQueues) maybeDropCQ(c *cqState) {
	if c.spec == nil && c.pending.len() == 0 && c.admitted.len() == 0 && len(c.usage) == 0 {
		queues.fair.tenants.remove(c)
		delete(queues.cqs, c.name)
	}
}

// poolUse is how much of usage u of (flavor, resource) k draws on the cohort pool.
func (c *cqState) poolUse(k frKey, u int64) int64 {
	return max(0, u-c.quota[k].guaranteed)
}

// addUsage changes the usage of one (flavor, resource) and the cohort aggregate. It
// has no other side effect, so what-if passes can apply and revert it freely.
func (c *cqState) addUsage(k frKey, delta int64) {
	old := c.usage[k]
	nu := old + delta
	if nu == 0 {
		delete(c.usage, k)
	} else {
		c.usage[k] = nu
	}
	if c.cohort != nil {
		d := c.poolUse(k, nu) - c.poolUse(k, old)
		if d != 0 {
			c.cohort.used[k] += d
		}
	}
}

func (c *cqState) charge(usage []frAmt, sign int64) {
	for _, u := range usage {
		c.addUsage(u.fr, sign*u.amt)
	}
}

// available is how much more of (flavor, resource) k the queue can use now: its own
// unused guaranteed quota plus what is free in the cohort pool, capped by the
// borrowing limit. Without a cohort: nominal minus usage.
func (c *cqState) available(k frKey) int64 {
	q, ok := c.quota[k]
	if !ok {
		return 0
	}
	u := c.usage[k]
	if c.cohort == nil {
		return max(0, q.nominal-u)
	}
	avail := max(0, q.guaranteed-u) + max(0, c.cohort.pool[k]-c.cohort.used[k])
	if q.borrowLimit >= 0 {
		avail = min(avail, max(0, satAdd(q.nominal, q.borrowLimit)-u))
	}
	return avail
}

// maxAvailable is what the queue could use of k if everything it may use were free.
func (c *cqState) maxAvailable(k frKey) int64 {
	q, ok := c.quota[k]
	if !ok {
		return 0
	}
	if c.cohort == nil {
		return q.nominal
	}
	m := satAdd(q.guaranteed, c.cohort.pool[k])
	if q.borrowLimit >= 0 {
		m = min(m, satAdd(q.nominal, q.borrowLimit))
	}
	return m
}

// drs is the queue's weighted dominant resource share: max over (flavor, resource) of
// borrowed / cohort-lendable, in parts per billion, scaled by 1000/weight.
func (c *cqState) drs() int64 { return c.drsWith(nil) }

// drsWith is drs with the amounts in extra added to the queue's usage, as
// if charged, without charging them: the share a queue would have after
// an admission, asked on every re-key, without writing the usage maps.
func (c *cqState) drsWith(extra []frAmt) int64 {
	if c.cohort == nil || c.spec == nil {
		return 0
	}
	var share uint64
	for k, u := range c.usage {
		if share = max(share, c.share1(k, u+amountFR(extra, k))); share >= math.MaxInt64 {
			return weighted(share, c.spec.FairShareWeight)
		}
	}
	for _, x := range extra {
		if _, charged := c.usage[x.fr]; !charged {
			share = max(share, c.share1(x.fr, amountFR(extra, x.fr)))
		}
	}
	return weighted(share, c.spec.FairShareWeight)
}

// share1 is usage u of k borrowed over the cohort's lendable pool of k, in
// parts per billion (math.MaxInt64 when there is no pool to borrow from).
func (c *cqState) share1(k frKey, u int64) uint64 {
	borrowed := u - c.quota[k].nominal
	if borrowed <= 0 {
		return 0
	}
	pool := c.cohort.pool[k]
	if pool <= 0 {
		return math.MaxInt64
	}
	hi, lo := bits.Mul64(uint64(borrowed), 1e9)
	if hi >= uint64(pool) {
		return math.MaxInt64
	}
	s, _ := bits.Div64(hi, lo, uint64(pool))
	return s
}

// amountFR sums the amounts of k in xs.
func amountFR(xs []frAmt, k frKey) int64 {
	var n int64
	for _, x := range xs {
		if x.fr == k {
			n += x.amt
		}
	}
	return n
}

func weighted(share uint64, weight int64) int64 {
	if share == 0 {
		return 0
	}
	if weight <= 0 || share >= math.MaxInt64 {
		return math.MaxInt64
	}
	hi, lo := bits.Mul64(share, 1000)
	if hi >= uint64(weight) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(weight))
	return int64(min(q, math.MaxInt64))
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// detachCohort removes the queue's contribution from its cohort.
func (queues *clusterQueues) detachCohort(c *cqState) {
	co := c.cohort
	if co == nil {
		return
	}
	for k, u := range c.usage {
		co.used[k] -= c.poolUse(k, u)
	}
	co.countParked(c, -1)
	if queues.fair.tenants.has(c) && !queues.fair.opts.wakeWholeCohort {
		co.orderDrop(c.tkey)
	}
	delete(co.members, c.name)
	c.cohort = nil
	if len(co.members) == 0 {
		delete(queues.cohorts, co.name)
		return
	}
	co.recomputePool()
}

// attachCohort adds the queue's contribution to the named cohort.
func (queues *clusterQueues) attachCohort(c *cqState, name string) {
	if name == "" {
		return
	}
	co, ok := queues.cohorts[name]
	if !ok {
		co = &cohortState{name: name, members: map[string]*cqState{}, pool: map[frKey]int64{}, used: map[frKey]int64{}}
		queues.cohorts[name] = co
	}
	co.members[c.name] = c
	c.cohort = co
	co.recomputePool()
	co.countParked(c, 1)
	for k, u := range c.usage {
		co.used[k] += c.poolUse(k, u)
	}
	if queues.fair.tenants.has(c) && !queues.fair.opts.wakeWholeCohort {
		co.orderAdd(c)
		queues.fair.markNeed(c)
	}
}

// recomputePool recomputes the lendable pool from the members' quotas. Sums saturate
// at math.MaxInt64 (about 8 PiB of memory in milli-bytes), so the pool is recomputed
// rather than maintained by subtraction. Cost O(members × flavor-resources), paid only
// when a ClusterQueue spec or cohort membership changes.
func (co *cohortState) recomputePool() {
	clear(co.pool)
	for _, m := range co.members {
		for k, q := range m.quota {
			co.pool[k] = satAdd(co.pool[k], q.lendable)
		}
	}
	co.recomputeKeys()
}
