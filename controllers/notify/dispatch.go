package notify

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/controllers/metrics"
)

// DispatchOptions configure a Dispatcher.
type DispatchOptions struct {
	// QueueSize bounds the deliveries waiting to be sent for each
	// namespace; one more is dropped and counted.
	QueueSize int
	// Workers is how many deliveries are sent at once, to different
	// namespaces (0: 4).
	Workers int
	// Attempts is how often a delivery is tried before it counts as
	// failed; Backoff is the wait before the second, doubling up to
	// MaxBackoff (or what the sink asked for with Retry-After).
	Attempts            int
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt.
	Timeout time.Duration
	// BreakerFailures is how many failed attempts in a row open a sink's
	// circuit breaker (0: 5); BreakerCooldown is how long its deliveries
	// are then dropped before one is tried again (0: 5 minutes).
	BreakerFailures int
	BreakerCooldown time.Duration
	// Prepare, when set, completes a report (its log tail and events)
	// before its first attempt, in the sending goroutine: what it fetches
	// never holds up whoever enqueued the report.
	Prepare func(ctx context.Context, r *Report)
	// Outcome, when set, is told how each delivery ended: nil when the
	// sink took it, the last error when it failed for good. Not called for
	// deliveries dropped unsent. It must not block.
	Outcome func(policy string, err error)
	// Clock times retries and breakers (the real clock when nil).
	Clock clock.WithDelayedExecution
}

// DefaultDispatchOptions are berth-controller's defaults: 64 deliveries
// waiting per namespace, 4 workers, 5 attempts from 2 s up to 1 min apart,
// 10 s per attempt, and a breaker that opens after 5 failed attempts in a
// row for 5 minutes.
func DefaultDispatchOptions() DispatchOptions {
	return DispatchOptions{QueueSize: 64, Workers: 4, Attempts: 5, Backoff: 2 * time.Second, MaxBackoff: time.Minute,
		Timeout: 10 * time.Second, BreakerFailures: 5, BreakerCooldown: 5 * time.Minute}
}

// delivery is one report on its way to one sink.
type delivery struct {
	// policy names the policy whose sink this is: the breaker's key.
	policy string
	// queue is the namespace the report is about: its fair share.
	queue   string
	sink    Sink
	report  *Report
	attempt int
}

// Dispatcher sends reports to sinks so that whoever reports (the notifier,
// on behalf of admission's controllers) never waits for a sink, and no
// tenant's sink holds up another tenant's reports:
//   - Enqueue returns at once; a namespace whose queue is full has the
//     report dropped and counted.
//   - Workers take deliveries round-robin across namespaces, one in flight
//     per namespace (fairQueue): a hanging sink holds one worker, for at
//     most Timeout per attempt.
//   - A sink that keeps failing is skipped for a while (breakers).
//   - A failed attempt is retried later from a timer, not by holding a
//     worker.
type Dispatcher struct {
	opts    DispatchOptions
	metrics *metrics.Metrics
	log     logr.Logger
	clock   clock.WithDelayedExecution
	// wake tells an idle worker that a delivery may be ready.
	wake chan struct{}

	mu       sync.Mutex
	queue    *fairQueue
	breakers *breakers
	closed   bool
	// retries are the deliveries waiting on their retry timers.
	retries map[clock.Timer]delivery
}

// NewDispatcher returns a Dispatcher; Run sends what is enqueued. Zero
// Workers, BreakerFailures and BreakerCooldown take their defaults.
func NewDispatcher(o DispatchOptions, m *metrics.Metrics, log logr.Logger) *Dispatcher {
	def := DefaultDispatchOptions()
	o.Workers = cmp.Or(o.Workers, def.Workers)
	o.BreakerFailures = cmp.Or(o.BreakerFailures, def.BreakerFailures)
	o.BreakerCooldown = cmp.Or(o.BreakerCooldown, def.BreakerCooldown)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Dispatcher{opts: o, metrics: m, log: log, clock: o.Clock, wake: make(chan struct{}, 1),
		queue: newFairQueue(max(o.QueueSize, 1)), breakers: newBreakers(o.BreakerFailures, o.BreakerCooldown),
		retries: map[clock.Timer]delivery{}}
}

// Enqueue queues a report for the sink of a policy without waiting. It
// reports false, and counts the report as dropped, when the queue of the
// report's namespace is full or the dispatcher stopped.
func (d *Dispatcher) Enqueue(policy string, s Sink, r *Report) bool {
	return d.offer(delivery{policy: policy, queue: r.Gang.Namespace, sink: s, report: r, attempt: 1})
}

func (d *Dispatcher) offer(dl delivery) bool {
	d.mu.Lock()
	ok := !d.closed && d.queue.push(dl)
	d.mu.Unlock()
	if !ok {
		d.metrics.Notification(dl.sink.Type(), metrics.NotificationDropped)
		return false
	}
	d.signal()
	return true
}

// signal wakes one idle worker, or leaves a wake-up for the next one.
func (d *Dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Forget drops what the dispatcher keeps about a policy's sink: the policy
// went away, or its sink changed.
func (d *Dispatcher) Forget(policy string) {
	d.mu.Lock()
	sinkType, wasOpen := d.breakers.forget(policy)
	d.mu.Unlock()
	if wasOpen {
		d.metrics.NotificationBreakerClosed(sinkType)
	}
}

// Run sends queued reports with the workers until ctx ends. Deliveries
// still queued or waiting for a retry then are dropped and counted.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range d.opts.Workers {
		wg.Go(func() { d.work(ctx) })
	}
	wg.Wait()
	d.stop()
}

// work sends deliveries until ctx ends.
func (d *Dispatcher) work(ctx context.Context) {
	for ctx.Err() == nil {
		dl, ok := d.next()
		if !ok {
			select {
			case <-ctx.Done():
			case <-d.wake:
			}
			continue
		}
		d.send(ctx, dl)
		d.mu.Lock()
		d.queue.done(dl.queue)
		d.mu.Unlock()
		d.signal() // the namespace may be served again
	}
}

// next takes the next delivery whose sink's breaker lets it through;
// those it does not are dropped and counted on the way.
func (d *Dispatcher) next() (delivery, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		dl, ok := d.queue.pop()
		if !ok {
			return delivery{}, false
		}
		if d.breakers.allow(dl.policy, d.clock.Now()) {
			if d.queue.ready() {
				d.signal() // another idle worker may take the next one
			}
			return dl, true
		}
		d.queue.done(dl.queue)
		d.metrics.Notification(dl.sink.Type(), metrics.NotificationDropped)
	}
}

// send makes one attempt, and retries, fails or counts the delivery.
func (d *Dispatcher) send(ctx context.Context, dl delivery) {
	actx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	if dl.attempt == 1 && d.opts.Prepare != nil {
		d.opts.Prepare(actx, dl.report)
	}
	err := dl.sink.Send(actx, dl.report)
	cancel()
	if ctx.Err() != nil && err != nil {
		// Stopping: the failure says nothing about the sink.
		d.metrics.Notification(dl.sink.Type(), metrics.NotificationDropped)
		return
	}
	d.record(dl, err == nil)
	if err == nil {
		d.metrics.Notification(dl.sink.Type(), metrics.NotificationSent)
		d.outcome(dl, nil)
		return
	}
	var se *SendError
	retryable := errors.As(err, &se) && se.Retryable
	if !retryable || dl.attempt >= d.opts.Attempts {
		d.metrics.Notification(dl.sink.Type(), metrics.NotificationFailed)
		d.log.Info("Could not deliver a failure report", "sink", dl.sink.Type(), "policy", dl.policy,
			"job", dl.report.Gang.Namespace+"/"+dl.report.Gang.JobName, "kind", dl.report.Kind, "attempts", dl.attempt,
			"error", err.Error())
		d.outcome(dl, err)
		return
	}
	d.retry(dl, max(d.backoff(dl.attempt), se.RetryAfter))
}

// record counts an attempt in the sink's breaker.
func (d *Dispatcher) record(dl delivery, ok bool) {
	d.mu.Lock()
	opened, closed := d.breakers.record(dl.policy, dl.sink.Type(), ok, d.clock.Now())
	d.mu.Unlock()
	switch {
	case opened:
		d.metrics.NotificationBreakerOpened(dl.sink.Type())
		d.log.Info("A sink keeps failing: its reports are dropped for a while", "sink", dl.sink.Type(), "policy", dl.policy,
			"failures", d.opts.BreakerFailures, "cooldown", d.opts.BreakerCooldown)
	case closed:
		d.metrics.NotificationBreakerClosed(dl.sink.Type())
	}
}

func (d *Dispatcher) outcome(dl delivery, err error) {
	if d.opts.Outcome != nil {
		d.opts.Outcome(dl.policy, err)
	}
}

// retry offers the delivery again after wait.
func (d *Dispatcher) retry(dl delivery, wait time.Duration) {
	dl.attempt++
	d.mu.Lock()
	defer d.mu.Unlock()
	var t clock.Timer
	t = d.clock.AfterFunc(wait, func() {
		d.mu.Lock()
		delete(d.retries, t)
		d.mu.Unlock()
		d.offer(dl)
	})
	d.retries[t] = dl
}

// backoff is the wait after the attempt-th failure: Backoff doubling per
// attempt, at most MaxBackoff.
func (d *Dispatcher) backoff(attempt int) time.Duration {
	b := d.opts.Backoff
	for i := 1; i < attempt && b < d.opts.MaxBackoff; i++ {
		b *= 2
	}
	return min(b, d.opts.MaxBackoff)
}

// stop refuses new deliveries and counts those still queued or waiting
// for a retry as dropped.
func (d *Dispatcher) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for t, dl := range d.retries {
		if t.Stop() {
			d.metrics.Notification(dl.sink.Type(), metrics.NotificationDropped)
		}
		delete(d.retries, t)
	}
	for _, dl := range d.queue.drain() {
		d.metrics.Notification(dl.sink.Type(), metrics.NotificationDropped)
	}
}
