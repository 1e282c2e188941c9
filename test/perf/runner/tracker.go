package runner

import (
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	toolscache "k8s.io/client-go/tools/cache"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/perf/scenario"
)

// record is the runner's view of one workload.
type record struct {
	created       time.Time     // when the runner called Create
	createLag     time.Duration // how late that was against the schedule
	err           error         // why the runner gave up on it
	settled       bool          // finished, or given up on
	firstAdmitted time.Time     // when the runner first saw it admitted
	running       bool
	heldFrom      uint64 // resourceVersion of the write that admitted the current run
	runs          int    // admissions seen; numbers the finish timers
	timer         *time.Timer
	evictions     int
	due           time.Time     // when the current run ends: admission seen + runtime
	finished      time.Time     // when the runner's watch saw it finished (or, for a Job, its Workload deleted)
	finishLag     time.Duration // finished, against due
	finishWritten time.Time     // when the runner's finish write returned (workloads mode)
	reason        string        // last pending reason seen
	reasonChanges int           // pending reasons berth wrote
	requeueing    bool          // a requeue was asked for since the last state that was not Evicting
}

// usageSample is every ClusterQueue's usage of its first quota resource, as
// a fraction of nominal quota, at one moment.
type usageSample struct {
	at    time.Duration
	perCQ []float64
}

// tracker follows every workload of a run: it creates them on schedule,
// sees them admitted, finishes them after their runtime (or requeues them
// when berth evicts them, as a job adapter would) and keeps the quota
// they hold per ClusterQueue. Its methods are safe for concurrent use.
type tracker struct {
	s      *scenario.Scenario
	mode   Mode
	cqs    []scenario.ClusterQueue
	wls    []scenario.Workload
	byKey  map[client.ObjectKey]int
	req    [][]int64 // per class, per resource: the gang's request in milli-units
	limits []cqLimits
	// primary is, per ClusterQueue, the resource its usage is reported in:
	// the first of its group's quota.
	primary []int
	cohorts map[string][]int // ClusterQueue indexes per cohort

	mu      sync.Mutex
	recs    []record
	usage   [][]int64 // per ClusterQueue, per resource
	settled int       // finished or failed to create
	done    chan struct{}
	// holdings are the closed intervals in which workloads held quota.
	holdings []holding
	// opaqueRV is set when a resourceVersion was not a number, so the
	// quota check (quotaViolations) cannot order writes.
	opaqueRV bool
	samples  []usageSample
	actions  chan action
	// trace, when set, receives a line per transition the runner sees.
	trace io.Writer
}

// tracef writes a trace line; the caller holds t.mu.
func (t *tracker) tracef(i int, format string, args ...any) {
	if t.trace == nil {
		return
	}
	w := t.wls[i]
	cq := w.ClusterQueue
	var cohort int64
	for _, m := range t.cohorts[t.cqs[cq].Cohort] {
		cohort += t.usage[m][0]
	}
	fmt.Fprintf(t.trace, "%s %s/%s %s [queue %d, cohort %d]\n", time.Now().Format("15:04:05.000000"),
		t.cqs[cq].Name, w.Name, fmt.Sprintf(format, args...), t.usage[cq][0], cohort)
}

// cqLimits are a ClusterQueue's quota per resource, in milli-units.
type cqLimits struct {
	nominal, capacity, guaranteed []int64 // capacity < 0: no borrowing limit
}

// newTracker prepares the records of every workload of s.
func newTracker(s *scenario.Scenario, mode Mode) *tracker {
	t := &tracker{s: s, mode: mode, cqs: s.ClusterQueues(), wls: s.Workloads(),
		byKey: map[client.ObjectKey]int{}, cohorts: map[string][]int{}, done: make(chan struct{})}
	t.recs = make([]record, len(t.wls))
	t.actions = make(chan action, len(t.wls)+1024)
	res := map[corev1.ResourceName]int{}
	for _, g := range s.Groups {
		for _, q := range g.Quota {
			if _, ok := res[q.Resource]; !ok {
				res[q.Resource] = len(res)
			}
		}
	}
	for i := range s.Classes {
		req := make([]int64, len(res))
		for r, q := range s.Classes[i].GangRequest() {
			req[res[r]] = q.MilliValue()
		}
		t.req = append(t.req, req)
	}
	for _, cq := range t.cqs {
		t.cohorts[cq.Cohort] = append(t.cohorts[cq.Cohort], cq.Index)
		l := cqLimits{nominal: make([]int64, len(res)), capacity: make([]int64, len(res)), guaranteed: make([]int64, len(res))}
		for _, q := range s.Groups[cq.Group].Quota {
			i := res[q.Resource]
			l.nominal[i], l.capacity[i] = q.Nominal.MilliValue(), -1
			if q.BorrowingLimit != nil {
				l.capacity[i] = q.Nominal.MilliValue() + q.BorrowingLimit.MilliValue()
			}
			if q.LendingLimit != nil {
				l.guaranteed[i] = q.Nominal.MilliValue() - q.LendingLimit.MilliValue()
			}
		}
		t.limits = append(t.limits, l)
		t.primary = append(t.primary, res[s.Groups[cq.Group].Quota[0].Resource])
		t.usage = append(t.usage, make([]int64, len(res)))
	}
	for i, w := range t.wls {
		t.byKey[client.ObjectKey{Namespace: t.cqs[w.ClusterQueue].Name, Name: w.Name}] = i
	}
	return t
}

// index returns the index of the workload a Workload object stands for:
// itself, or in jobs mode the Job that owns it.
func (t *tracker) index(wl *berthv1.Workload) (int, bool) {
	key := client.ObjectKeyFromObject(wl)
	if t.mode == ModeJobs {
		ref := metav1.GetControllerOf(wl)
		if ref == nil {
			return 0, false
		}
		key.Name = ref.Name
	}
	i, ok := t.byKey[key]
	return i, ok
}

// observe handles one state of a Workload seen by the runner's informer.
//
// Quota is accounted in the order of the watch, which is the order berth
// sees changes in: a workload counts from the state that admits it to the
// state that finishes or evicts it. Counting from when the runner's own
// finish write returns instead would let the runner see berth reuse quota
// before it had released it.
func (t *tracker) observe(obj any) {
	wl, ok := obj.(*berthv1.Workload)
	if !ok {
		return
	}
	i, ok := t.index(wl)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &t.recs[i]
	if !r.finished.IsZero() {
		return
	}
	if lifecycle.IsFinished(wl) {
		t.finishedLocked(i, now, t.revision(wl))
		return
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved); wl.Status.Admission == nil && c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason != r.reason {
		r.reason = c.Reason
		// "Pending" is what a requeue after eviction writes, not berth's
		// pending reason.
		if c.Reason != string(berthv1.ReasonPending) {
			r.reasonChanges++
		}
	}
	phase := lifecycle.PhaseOf(wl)
	if phase != lifecycle.Evicting {
		r.requeueing = false
	}
	switch {
	case lifecycle.MayRun(phase) && !r.running:
		t.admittedLocked(i, now, t.revision(wl))
		t.tracef(i, "admitted rv %s", wl.ResourceVersion)
	case phase == lifecycle.Evicting:
		t.evictedLocked(i, wl)
	}
}

// evictedLocked handles a state of workload i in which berth evicts it.
// The watch may show that state without the admission before it — a
// relist after the watch fell behind shows only the latest state — so the
// requeue does not depend on having seen the run; it is asked for once
// per eviction.
func (t *tracker) evictedLocked(i int, wl *berthv1.Workload) {
	r := &t.recs[i]
	if r.running {
		r.running = false
		r.evictions++
		if r.timer != nil {
			r.timer.Stop()
		}
		t.charge(i, -1)
		t.released(i, t.revision(wl))
		t.tracef(i, "evicted rv %s", wl.ResourceVersion)
	}
	if t.mode == ModeWorkloads && !r.requeueing {
		// berth's job adapter requeues an evicted workload once its
		// pods are gone; here there are none.
		r.requeueing = true
		t.actions <- action{kind: actionRequeue, wl: i}
	}
}

// admittedLocked starts workload i's run: it holds quota from now (write
// rv) for its class's runtime.
func (t *tracker) admittedLocked(i int, now time.Time, rv uint64) {
	r := &t.recs[i]
	r.running = true
	r.runs++
	if r.firstAdmitted.IsZero() {
		r.firstAdmitted = now
	}
	t.charge(i, 1)
	r.heldFrom = rv
	runtime := t.s.Classes[t.wls[i].Class].Runtime.Duration
	r.due = now.Add(runtime)
	a := action{kind: actionFinish, wl: i, run: r.runs}
	r.timer = time.AfterFunc(runtime, func() { t.actions <- a })
}

// finishWritten records when the runner's finish write for workload i
// returned.
func (t *tracker) finishWritten(i int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recs[i].finishWritten.IsZero() {
		t.recs[i].finishWritten = at
	}
}

// deleted handles a Workload deletion: in jobs mode, how berth releases the
// quota of a Job the runner deleted.
func (t *tracker) deleted(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	wl, ok := obj.(*berthv1.Workload)
	if !ok {
		return
	}
	if i, ok := t.index(wl); ok {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.finishedLocked(i, time.Now(), t.revision(wl))
	}
}

// finishedLocked records that workload i finished at now (write rv) and
// releases its quota.
func (t *tracker) finishedLocked(i int, now time.Time, rv uint64) {
	r := &t.recs[i]
	if !r.finished.IsZero() {
		return
	}
	if r.running {
		t.charge(i, -1)
		t.released(i, rv)
	}
	r.finished, r.finishLag, r.running = now, now.Sub(r.due), false
	t.tracef(i, "finished")
	t.settleLocked(i)
}

// failed records that the runner gave up on workload i: it could not be
// created, or its finish or requeue could not be written.
func (t *tracker) failed(i int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recs[i].err == nil {
		t.recs[i].err = err
	}
	t.settleLocked(i)
}

// settleLocked counts workload i as done with, once.
func (t *tracker) settleLocked(i int) {
	if t.recs[i].settled {
		return
	}
	t.recs[i].settled = true
	t.settled++
	if t.settled == len(t.wls) {
		close(t.done)
	}
}

// current reports whether run number run of workload i is still going, so
// a finish timer that fired after an eviction is ignored.
func (t *tracker) current(i, run int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &t.recs[i]
	return r.running && r.runs == run && r.finished.IsZero()
}

// charge adds (sign 1) or releases (sign -1) workload i's request.
func (t *tracker) charge(i int, sign int64) {
	w := t.wls[i]
	for r, amt := range t.req[w.Class] {
		t.usage[w.ClusterQueue][r] += sign * amt
	}
}

// sample appends every ClusterQueue's usage of its first quota resource.
func (t *tracker) sample(at time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := usageSample{at: at, perCQ: make([]float64, len(t.cqs))}
	for i := range t.cqs {
		if n := t.limits[i].nominal[t.primary[i]]; n > 0 {
			s.perCQ[i] = float64(t.usage[i][t.primary[i]]) / float64(n)
		}
	}
	t.samples = append(t.samples, s)
}

// progress returns how many workloads were created, admitted at least once
// and finished.
func (t *tracker) progress() (created, admitted, finished int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.recs {
		r := &t.recs[i]
		if !r.created.IsZero() {
			created++
		}
		if !r.firstAdmitted.IsZero() {
			admitted++
		}
		if !r.finished.IsZero() {
			finished++
		}
	}
	return created, admitted, finished
}
