// Package scheduler is the shell around the admission engine: it feeds the
// engine what the API server says about queues and workloads, resolved into
// the engine's plain facts, runs admission cycles, and writes the engine's
// decisions back — admissions, bookings, pending reasons and every eviction
// (preemptions, failed bookings, drains, deactivations, changed jobs) — as
// Workload status, with their metrics and events. It is the one writer of
// evictions.
//
// The engine is not safe for concurrent use; Scheduler serialises every call
// into it with one mutex and never holds that mutex across an API call.
// Decisions are applied after the cycle that made them, in parallel. The
// engine assumes an admission as soon as it decides it; a write that fails is
// rolled back, so the engine never counts quota the API server does not know
// about.
package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/lifecycle/persist"
	"github.com/berth-dev/berth/controllers/metrics"
)

// DefaultWorkers is Options.Workers when it is not set. Each write waits
// for the API server, so decisions are written at most this many times a
// round trip: under a saturated API server (a second a request) 16 held a
// burst's admissions back (docs/performance.md, "Workers against API
// latency").
const DefaultWorkers = 64

// Options configure a Scheduler.
type Options struct {
	// Engine configures the admission engine.
	Engine admission.Options
	// Workers is how many decisions are written to the API server at once.
	Workers int
	// RetryAfter is how long to wait before another cycle after a decision
	// could not be written.
	RetryAfter time.Duration
	// Resync runs a cycle at least this often, so that time-based rules of
	// the engine (starvation protection) progress without events.
	Resync time.Duration
	// PendingStatusDelay is how long a workload must stay pending with a
	// waiting reason (insufficient quota, behind the head) before the
	// reason is written to its status. Zero never writes one: in a deep
	// backlog that write would be the second of most workloads, and the
	// visibility API, Explain and the queue metrics carry the reason
	// anyway. Reasons that need action are written at once either way.
	PendingStatusDelay time.Duration
	// Clock is the engine's and the status writes' clock; the real clock
	// when nil.
	Clock clock.PassiveClock
	// Metrics records what the loop does; required.
	Metrics *metrics.Metrics
	// LoadCapacity, when set, gives the engine every flavor's topology and
	// every node's capacity before the first cycle, so that placements of
	// admitted workloads are known before anything new is placed.
	LoadCapacity func(ctx context.Context) error
}

// Scheduler owns the admission engine. Reconcilers feed it; its Start runs
// the admission loop and must run only on the leader.
type Scheduler struct {
	client   client.Client
	reader   client.Reader
	recorder events.EventRecorder
	writer   persist.Writer
	opts     Options

	mu     sync.Mutex
	engine *admission.Engine
	// assumed holds, per admitted workload, the resourceVersion our
	// admission write produced, until the cache shows it. A cached copy
	// older than that is stale and must not turn the workload back into a
	// pending one, or it would be admitted twice.
	assumed map[admission.WorkloadKey]string
	// pending decides when pending reasons are written.
	pending pendingNotes
	// queues tracks which LocalQueue each queued workload is in, and
	// whether it is admitted, for O(1) LocalQueue counts.
	queues queueCounts
	// explained caches the visibility API's explanations until the next
	// cycle.
	explained explanations
	// records are the replicas offered or admitted without a Workload
	// (records.go).
	records records
	// fed is what the engine was last given per workload: an event that
	// changed none of it is not converted again.
	fed fedInputs
	// jobs are the jobs whose change was reported (ReportChange), until
	// their eviction is told on them.
	jobs map[admission.WorkloadKey]runtime.Object

	// serving is true while Start runs with the cluster loaded: the engine
	// then answers for the whole cluster.
	serving atomic.Bool

	wake chan struct{}
	// timer pokes at the engine's next wake-up (see admission.NextWake).
	timer *time.Timer
}

// New returns a Scheduler that writes with c and re-reads after conflicts
// with reader (an uncached reader).
func New(c client.Client, reader client.Reader, recorder events.EventRecorder, opts Options) (*Scheduler, error) {
	engine, err := admission.New(opts.Engine)
	if err != nil {
		return nil, fmt.Errorf("creating admission engine: %w", err)
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 200 * time.Millisecond
	}
	if opts.Resync <= 0 {
		opts.Resync = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Metrics == nil {
		return nil, fmt.Errorf("scheduler options: Metrics is required")
	}
	return &Scheduler{
		client: c, reader: reader, recorder: recorder, opts: opts,
		writer: persist.Writer{Client: c, Reader: reader, Clock: opts.Clock},
		engine: engine, assumed: map[admission.WorkloadKey]string{}, fed: fedInputs{}, records: records{}, wake: make(chan struct{}, 1),
		pending: newPendingNotes(opts.PendingStatusDelay), queues: newQueueCounts(), jobs: map[admission.WorkloadKey]runtime.Object{},
	}, nil
}

// NeedLeaderElection makes the admission loop run only on the leader.
func (s *Scheduler) NeedLeaderElection() bool { return true }

// UpsertClusterQueue gives the engine a ClusterQueue's current spec and the
// flavors it names that do not exist (the queue admits nothing while there
// are any, and its waiting workloads are told to create them); hold keeps it
// from admitting until its flavors were checked. An invalid spec is returned
// as an error and leaves the engine unchanged.
func (s *Scheduler) UpsertClusterQueue(cq *berthv1.ClusterQueue, flavors lifecycle.QueueFlavors, hold bool) error {
	ecq := lifecycle.ClusterQueueToEngine(cq, flavors.NodeLabels)
	ecq.Stopped = ecq.Stopped || hold
	ecq.MissingFlavors = flavors.Missing
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.engine.UpsertClusterQueue(ecq); err != nil {
		return fmt.Errorf("ClusterQueue %s: %w", cq.Name, err)
	}
	s.poke()
	return nil
}

// DeleteClusterQueue removes a ClusterQueue; its pending workloads are held.
func (s *Scheduler) DeleteClusterQueue(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engine.DeleteClusterQueue(name)
	s.poke()
}

// UpsertWorkload gives the engine a workload's current state, queued in q.
// A cached copy older than this scheduler's own admission of the workload is
// ignored.
func (s *Scheduler) UpsertWorkload(wl *berthv1.Workload, q lifecycle.QueueRef) error {
	key := lifecycle.KeyOf(wl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records.shadows(key) {
		// The replica's pod holds its quota record: a Workload of that
		// name is not the replica's (berth creates one only for a replica
		// that needs a status of its own).
		return nil
	}
	if r := s.records[key]; r != nil && r.state == lifecycle.RecordOffered {
		// The replica's Workload, created meanwhile (a surge pod of a
		// rollout swap), takes its place in the engine.
		r.state = lifecycle.RecordNeedsWorkload
	}
	return s.upsertLocked(wl, q)
}

// upsertLocked is UpsertWorkload with s.mu held.
func (s *Scheduler) upsertLocked(wl *berthv1.Workload, q lifecycle.QueueRef) error {
	key := lifecycle.KeyOf(wl)
	if rv, ok := s.assumed[key]; ok {
		if wl.Status.Admission == nil {
			if rv == "" {
				return nil // our admission is being written
			}
			if cmp, err := resourceversion.CompareResourceVersion(wl.ResourceVersion, rv); err == nil && cmp < 0 {
				return nil
			}
		}
		delete(s.assumed, key)
	}
	if wl.Status.Admission != nil {
		// Admitted, by this scheduler or another owner: a pending reason on
		// record no longer describes the status, and if the workload returns
		// to the queue its reason must be written again.
		s.pending.forget(key)
	} else if c := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved); c != nil && c.Status == metav1.ConditionFalse {
		s.pending.recorded(key, berthv1.WorkloadReason(c.Reason))
	}
	in := inputOf(wl, q)
	if s.fed.unchanged(key, in) {
		// The engine holds this workload as it is, and its LocalQueue
		// counts it as they did: no conversion, no cycle.
		return nil
	}
	ew := lifecycle.WorkloadToEngine(wl, q)
	wasBooking := s.engine.Booking(key)
	if err := s.engine.UpsertWorkload(ew); err != nil {
		delete(s.fed, key)
		return fmt.Errorf("workload %s/%s: %w", wl.Namespace, wl.Name, err)
	}
	s.fed[key] = in
	if wasBooking && ew.Admission != nil && !s.engine.Booking(key) {
		// The booking is provisioned: the gang may start now.
		s.opts.Metrics.ObserveAdmissionWait(ew.Admission.ClusterQueue, metrics.PathProvisioned, s.now().Sub(wl.CreationTimestamp.Time))
	}
	if _, held := s.engine.Held(key); held {
		// Not queued at all: it counts in no LocalQueue.
		s.queues.remove(key)
	} else {
		s.queues.set(key, wl.Spec.QueueName, wl.Status.Admission != nil)
	}
	s.poke()
	return nil
}

// DeleteWorkload removes a finished or deleted workload, releasing its quota.
func (s *Scheduler) DeleteWorkload(key admission.WorkloadKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records.shadows(key) {
		return // its pod holds its quota until Forget
	}
	s.deleteLocked(key)
}

// deleteLocked is DeleteWorkload with s.mu held.
func (s *Scheduler) deleteLocked(key admission.WorkloadKey) {
	delete(s.assumed, key)
	delete(s.fed, key)
	s.pending.forget(key)
	s.queues.remove(key)
	delete(s.jobs, key)
	s.engine.DeleteWorkload(key)
	s.poke()
}

// Explain says why a pending workload is not admitted.
func (s *Scheduler) Explain(key admission.WorkloadKey) (admission.Explanation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.engine.Explain(key)
}

// Serving is true once the scheduler runs with the cluster loaded, that is
// on the leader.
func (s *Scheduler) Serving() bool { return s.serving.Load() }

// explainChunk is how many entries of a visibility page are explained per
// hold of the engine's lock.
const explainChunk = 16

// Pending lists a page of a ClusterQueue's pending workloads in the order
// the engine serves them, each explained. The engine's lock is held for the
// walk of the queue, then for explainChunk explanations at a time, released
// in between: a reader of a long page (up to MaxLimit entries, each a fit
// and preemption what-if) delays an admission cycle by one chunk at most,
// instead of by the whole page. An entry admitted or deleted between the
// walk and its explanation is left out of the page. Explanations are kept
// until the next cycle (explanations): a workload is explained once per
// cycle however often its line is read.
func (s *Scheduler) Pending(q admission.PendingQuery) (admission.PendingPage, bool) {
	s.mu.Lock()
	page, ok := s.engine.PendingOrder(q)
	s.mu.Unlock()
	if !ok {
		return page, false
	}
	out := make([]admission.PendingWorkload, 0, len(page.Items))
	for start := 0; start < len(page.Items); start += explainChunk {
		s.mu.Lock()
		for _, it := range page.Items[start:min(start+explainChunk, len(page.Items))] {
			if ex, still := s.explained.explain(s.engine, it, page.FairShare); still {
				out = append(out, ex)
			}
		}
		s.mu.Unlock()
	}
	page.Items = out
	return page, true
}

// poke asks for a cycle; wakes coalesce. Callers may hold s.mu.
func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start loads every queue and workload from the cache, then runs admission
// cycles until ctx ends. Nothing is admitted before the load completes, so
// quota held by admitted workloads is known before any new admission.
func (s *Scheduler) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("scheduler")
	ctx = log.IntoContext(ctx, logger)
	if err := s.load(ctx); err != nil {
		return fmt.Errorf("loading queues and workloads: %w", err)
	}
	s.serving.Store(true)
	defer s.serving.Store(false)
	logger.Info("admission loop started")
	ticker := time.NewTicker(s.opts.Resync)
	defer ticker.Stop()
	flush := time.NewTicker(max(s.opts.PendingStatusDelay/4, 50*time.Millisecond))
	defer flush.Stop()
	idle := time.NewTicker(idleSampleInterval)
	defer idle.Stop()
	lastIdle := s.now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			s.cycle(ctx)
		case <-ticker.C:
			s.sweepRecords(ctx)
			s.cycle(ctx)
		case <-flush.C:
			s.flushPending(ctx)
		case <-idle.C:
			lastIdle = s.sampleIdle(lastIdle)
		}
	}
}

func (s *Scheduler) load(ctx context.Context) error {
	cqs := &berthv1.ClusterQueueList{}
	if err := s.client.List(ctx, cqs); err != nil {
		return fmt.Errorf("listing ClusterQueues: %w", err)
	}
	for i := range cqs.Items {
		// A queue naming a missing flavor is held until its reconciler
		// sees the flavor, so nothing is admitted into it meanwhile.
		if err := s.UpsertClusterQueue(&cqs.Items[i], lifecycle.QueueFlavors{}, true); err != nil {
			// An invalid ClusterQueue is reported on its status by its
			// reconciler; its workloads stay held.
			log.FromContext(ctx).Info("ClusterQueue not loaded", "clusterQueue", cqs.Items[i].Name, "error", err.Error())
		}
	}
	if s.opts.LoadCapacity != nil {
		if err := s.opts.LoadCapacity(ctx); err != nil {
			return fmt.Errorf("loading node capacity: %w", err)
		}
	}
	wls := &berthv1.WorkloadList{}
	if err := s.client.List(ctx, wls); err != nil {
		return fmt.Errorf("listing Workloads: %w", err)
	}
	// In creation order: LocalQueue fair sharing tags workloads in the order
	// the engine first sees them, so a restart keeps each LocalQueue's own
	// order and gives identical objects identical decisions.
	slices.SortFunc(wls.Items, func(a, b berthv1.Workload) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for i := range wls.Items {
		wl := &wls.Items[i]
		if err := s.Sync(ctx, wl); err != nil {
			return err
		}
	}
	return s.loadRecords(ctx)
}

// Sync feeds one workload to the engine as its current state demands: a
// finished workload releases its quota, any other is upserted with the facts
// of its queues, from which the engine decides whether it may be queued and
// whether it must be evicted.
func (s *Scheduler) Sync(ctx context.Context, wl *berthv1.Workload) error {
	_, err := s.SyncWorkload(ctx, wl)
	return err
}

// SyncWorkload is Sync that also returns why the engine refused the
// workload's spec, if it did. A workload that holds quota stays in the engine
// until it is gone, even while it is being deleted: its finalizer keeps it
// until its pods are.
func (s *Scheduler) SyncWorkload(ctx context.Context, wl *berthv1.Workload) (*Unqueueable, error) {
	phase := lifecycle.PhaseOf(wl)
	if phase == lifecycle.Finished || phase == lifecycle.GaveUp || (!wl.DeletionTimestamp.IsZero() && !lifecycle.HoldsQuota(phase)) {
		// Done, not to be queued again, or going: no quota and no queue.
		s.DeleteWorkload(lifecycle.KeyOf(wl))
		return nil, nil
	}
	q, err := ResolveQueue(ctx, s.client, wl)
	if err != nil {
		return nil, err
	}
	if err := s.UpsertWorkload(wl, q); err != nil {
		// Invalid input never reaches the engine; the API's own validation
		// makes this rare, so it is reported, not retried.
		return &Unqueueable{Reason: berthv1.ReasonInvalidSpec, Message: err.Error()}, nil
	}
	return nil, nil
}

// cycle runs one admission cycle and applies its decisions.
func (s *Scheduler) cycle(ctx context.Context) {
	s.mu.Lock()
	start := time.Now()
	res := s.engine.Cycle(s.now())
	s.fed.forgetDecided(res)
	res.Admitted = s.settleOffers(&res)
	s.explained.reset()
	s.opts.Metrics.ObserveCycle(time.Since(start))
	s.armWake()
	// Until each admission is written, a cached copy of the workload
	// without it is stale by definition.
	for _, a := range res.Admitted {
		s.assumed[a.Key] = ""
		s.pending.forget(a.Key)
		s.queues.admit(a.Key)
	}
	now := s.now()
	for _, p := range res.Pending {
		s.pending.note(p, now)
	}
	s.mu.Unlock()
	if len(res.Admitted)+len(res.Preemptions)+len(res.Bookings)+len(res.Evictions) == 0 {
		s.flushPending(ctx)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.opts.Workers)
	run := func(f func()) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f()
		}()
	}
	for _, a := range res.Admitted {
		run(func() { s.applyAdmission(ctx, a) })
	}
	for _, p := range res.Preemptions {
		run(func() { s.applyPreemption(ctx, p) })
	}
	for _, d := range res.Bookings {
		run(func() { s.applyBooking(ctx, d) })
	}
	for _, ev := range res.Evictions {
		run(func() { s.applyEviction(ctx, ev) })
	}
	wg.Wait()
	s.flushPending(ctx)
}

// flushPending writes the pending reasons whose delay has passed.
func (s *Scheduler) flushPending(ctx context.Context) {
	s.mu.Lock()
	due := s.pending.take(s.now())
	s.mu.Unlock()
	if len(due) == 0 {
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.opts.Workers)
	for _, p := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.applyPending(ctx, p)
		}()
	}
	wg.Wait()
}

// armWake sets the timer to the engine's next wake-up, so that booking
// bounds and backoffs are acted on when they elapse rather than at the next
// resync. The caller holds s.mu.
func (s *Scheduler) armWake() {
	next := s.engine.NextWake()
	if next == 0 {
		return
	}
	d := max(time.Unix(0, next).Sub(s.now()), 10*time.Millisecond)
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(d, s.poke)
}

// now is the scheduler's clock's time.
func (s *Scheduler) now() time.Time { return s.opts.Clock.Now() }

// retryLater schedules another cycle after a failed write.
func (s *Scheduler) retryLater() { time.AfterFunc(s.opts.RetryAfter, s.poke) }

func (s *Scheduler) getWorkload(ctx context.Context, key admission.WorkloadKey) (*berthv1.Workload, error) {
	wl := &berthv1.Workload{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, wl); err != nil {
		return nil, err
	}
	return wl, nil
}

func logWriteError(ctx context.Context, err error, msg string, key admission.WorkloadKey) {
	logger := log.FromContext(ctx)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		logger.V(2).Info(msg, "workload", key, "error", err.Error())
		return
	}
	logger.Error(err, msg, "workload", key)
}

// idleSampleInterval is how often idle capacity is sampled: often enough for
// a counter read every scrape, rarely enough that its O(nodes) walk is noise.
const idleSampleInterval = 5 * time.Second

// sampleIdle adds the capacity idle while gangs wait since last, and
// returns now.
func (s *Scheduler) sampleIdle(last time.Time) time.Time {
	s.mu.Lock()
	idle := s.engine.IdleWhileWaiting()
	s.mu.Unlock()
	now := s.now()
	for _, c := range idle {
		s.opts.Metrics.AddIdle(c.Flavor, string(c.Resource), float64(c.Amount)/1000, now.Sub(last))
	}
	return now
}
