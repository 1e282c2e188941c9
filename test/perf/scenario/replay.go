package scenario

import (
	"container/heap"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReplayResult is what the ideal scheduler achieves on a scenario.
type ReplayResult struct {
	// Makespan is when the last workload finishes, from the first arrival
	// time 0: the quota floor of the run's wall time.
	Makespan time.Duration
	// Waits summarises, per class (in Scenario.Classes order), the time
	// from arrival to admission.
	Waits []Summary
	// Admitted is each workload's admission time, in Workloads() order.
	Admitted []time.Duration
}

// Replay runs an ideal zero-latency greedy scheduler over the scenario: a
// workload holds its gang's quota from admission for exactly its runtime;
// whenever something arrives or finishes, every cohort that changed admits,
// in order of priority (higher first), then arrival, then ClusterQueue and
// class, every pending workload that fits at that instant. "Fits" has
// berth's quota semantics: a ClusterQueue uses at most nominal +
// borrowingLimit, and what it uses above its guaranteed part (nominal minus
// lendable) is drawn from the cohort's pool of lendable quota. A
// BestEffortFIFO queue lets smaller work pass a head that does not fit; a
// StrictFIFO queue's head blocks the rest of its queue. No preemption, no
// anti-starvation reservation: the replay is the floor, not a model of
// berth.
//
// The scenario must be valid (Validate): then every workload fits an empty
// cohort and the replay terminates.
func Replay(s *Scenario) ReplayResult {
	r := newReplayer(s)
	r.run()
	res := ReplayResult{Admitted: r.admitted, Waits: make([]Summary, len(s.Classes))}
	perClass := make([][]time.Duration, len(s.Classes))
	for i, w := range r.wls {
		perClass[w.Class] = append(perClass[w.Class], r.admitted[i]-w.Arrival)
		res.Makespan = max(res.Makespan, r.admitted[i]+s.Classes[w.Class].Runtime.Duration)
	}
	for ci := range perClass {
		res.Waits[ci] = Summarize(perClass[ci])
	}
	return res
}

// replayer is the state of one replay. Quantities are milli-units, indexed
// by resource.
type replayer struct {
	s        *Scenario
	wls      []Workload
	admitted []time.Duration
	req      [][]int64 // per class
	cqs      []cqState
	cohorts  []cohortState
	lanes    []lane // per (ClusterQueue, class): cq*len(classes)+class
	done     completions
}

type cqState struct {
	cohort     int
	strict     bool
	usage      []int64
	capacity   []int64 // nominal + borrowingLimit (MaxInt64: no limit)
	guaranteed []int64 // nominal - lendable
}

type cohortState struct {
	pool  []int64 // Σ lendable
	used  []int64 // Σ usage above guaranteed
	lanes []int
	dirty bool
}

// lane holds one class's workloads of one ClusterQueue in arrival order;
// items[next:arrived] are pending. All items request the same, so a head
// that does not fit means the lane does not fit.
type lane struct {
	cq, class     int
	prio          int32
	items         []int
	next, arrived int
}

func newReplayer(s *Scenario) *replayer {
	res := map[corev1.ResourceName]int{}
	for _, g := range s.Groups {
		for _, q := range g.Quota {
			if _, ok := res[q.Resource]; !ok {
				res[q.Resource] = len(res)
			}
		}
	}
	r := &replayer{s: s, wls: s.Workloads()}
	r.admitted = make([]time.Duration, len(r.wls))
	for i := range s.Classes {
		req := make([]int64, len(res))
		for name, q := range s.Classes[i].GangRequest() {
			req[res[name]] = q.MilliValue()
		}
		r.req = append(r.req, req)
	}
	cohortIndex := map[string]int{}
	for _, cq := range s.ClusterQueues() {
		ci, ok := cohortIndex[cq.Cohort]
		if !ok {
			ci = len(r.cohorts)
			cohortIndex[cq.Cohort] = ci
			r.cohorts = append(r.cohorts, cohortState{pool: make([]int64, len(res)), used: make([]int64, len(res))})
		}
		g := &s.Groups[cq.Group]
		st := cqState{cohort: ci, strict: g.QueueingStrategy == "StrictFIFO",
			usage: make([]int64, len(res)), capacity: make([]int64, len(res)), guaranteed: make([]int64, len(res))}
		for _, q := range g.Quota {
			i := res[q.Resource]
			nominal, lendable := q.Nominal.MilliValue(), q.Nominal.MilliValue()
			if q.LendingLimit != nil {
				lendable = q.LendingLimit.MilliValue()
			}
			st.capacity[i] = math.MaxInt64
			if q.BorrowingLimit != nil {
				st.capacity[i] = nominal + q.BorrowingLimit.MilliValue()
			}
			st.guaranteed[i] = nominal - lendable
			r.cohorts[ci].pool[i] += lendable
		}
		r.cqs = append(r.cqs, st)
		for ci2, c := range s.Classes {
			r.cohorts[ci].lanes = append(r.cohorts[ci].lanes, len(r.lanes))
			r.lanes = append(r.lanes, lane{cq: cq.Index, class: ci2, prio: c.Priority})
		}
	}
	for i, w := range r.wls {
		l := &r.lanes[w.ClusterQueue*len(s.Classes)+w.Class]
		l.items = append(l.items, i)
	}
	return r
}

// run processes arrivals and completions in time order until all are done.
func (r *replayer) run() {
	next := 0
	for next < len(r.wls) || r.done.Len() > 0 {
		t := time.Duration(math.MaxInt64)
		if next < len(r.wls) {
			t = r.wls[next].Arrival
		}
		if r.done.Len() > 0 {
			t = min(t, r.done[0].at)
		}
		for r.done.Len() > 0 && r.done[0].at <= t {
			c := heap.Pop(&r.done).(completion)
			w := r.wls[c.wl]
			r.charge(w.ClusterQueue, r.req[w.Class], -1)
			r.cohorts[r.cqs[w.ClusterQueue].cohort].dirty = true
		}
		for next < len(r.wls) && r.wls[next].Arrival <= t {
			w := r.wls[next]
			r.lanes[w.ClusterQueue*len(r.s.Classes)+w.Class].arrived++
			r.cohorts[r.cqs[w.ClusterQueue].cohort].dirty = true
			next++
		}
		for ci := range r.cohorts {
			if r.cohorts[ci].dirty {
				r.cohorts[ci].dirty = false
				r.pass(ci, t)
			}
		}
	}
}

// pass admits, at time t, everything of the cohort that fits, best first.
func (r *replayer) pass(ci int, t time.Duration) {
	q := laneQueue{r: r}
	for _, li := range r.cohorts[ci].lanes {
		if l := &r.lanes[li]; l.next < l.arrived {
			q.items = append(q.items, li)
		}
	}
	heap.Init(&q)
	blocked := map[int]bool{}
	for q.Len() > 0 {
		li := heap.Pop(&q).(int)
		l := &r.lanes[li]
		if blocked[l.cq] {
			continue
		}
		if !r.fits(l.cq, r.req[l.class]) {
			if r.cqs[l.cq].strict {
				blocked[l.cq] = true
			}
			continue
		}
		wi := l.items[l.next]
		l.next++
		r.admitted[wi] = t
		r.charge(l.cq, r.req[l.class], 1)
		heap.Push(&r.done, completion{at: t + r.s.Classes[l.class].Runtime.Duration, wl: wi})
		if l.next < l.arrived {
			heap.Push(&q, li)
		}
	}
}

// fits reports whether the ClusterQueue can take req now.
func (r *replayer) fits(cq int, req []int64) bool {
	st := &r.cqs[cq]
	co := &r.cohorts[st.cohort]
	for i, amt := range req {
		if amt == 0 {
			continue
		}
		after := st.usage[i] + amt
		if after > st.capacity[i] {
			return false
		}
		extra := max(after-st.guaranteed[i], 0) - max(st.usage[i]-st.guaranteed[i], 0)
		if co.used[i]+extra > co.pool[i] {
			return false
		}
	}
	return true
}

// charge adds (sign 1) or releases (sign -1) req to the ClusterQueue.
func (r *replayer) charge(cq int, req []int64, sign int64) {
	st := &r.cqs[cq]
	co := &r.cohorts[st.cohort]
	for i, amt := range req {
		before := max(st.usage[i]-st.guaranteed[i], 0)
		st.usage[i] += sign * amt
		co.used[i] += max(st.usage[i]-st.guaranteed[i], 0) - before
	}
}

// completion is when an admitted workload releases its quota.
type completion struct {
	at time.Duration
	wl int
}

// completions is a min-heap by time, then workload index.
type completions []completion

func (c completions) Len() int { return len(c) }
func (c completions) Less(i, j int) bool {
	if c[i].at != c[j].at {
		return c[i].at < c[j].at
	}
	return c[i].wl < c[j].wl
}
func (c completions) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)   { *c = append(*c, x.(completion)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// laneQueue orders lanes by their head: priority (higher first), arrival,
// ClusterQueue, class — a unique key, so the replay is deterministic.
type laneQueue struct {
	r     *replayer
	items []int
}

func (q *laneQueue) Len() int { return len(q.items) }
func (q *laneQueue) Less(i, j int) bool {
	a, b := &q.r.lanes[q.items[i]], &q.r.lanes[q.items[j]]
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	ta, tb := q.r.wls[a.items[a.next]].Arrival, q.r.wls[b.items[b.next]].Arrival
	if ta != tb {
		return ta < tb
	}
	if a.cq != b.cq {
		return a.cq < b.cq
	}
	return a.class < b.class
}
func (q *laneQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *laneQueue) Push(x any)    { q.items = append(q.items, x.(int)) }
func (q *laneQueue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}
