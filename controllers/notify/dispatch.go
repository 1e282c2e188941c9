package notify

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/berth-dev/berth/controllers/metrics"
)

// DispatchOptions configure a Dispatcher.
type DispatchOptions struct {
	// QueueSize bounds the deliveries waiting to be sent; one more is
	// dropped and counted.
	QueueSize int
	// Attempts is how often a delivery is tried before it counts as
	// failed; Backoff is the wait before the second, doubling up to
	// MaxBackoff (or what the sink asked for with Retry-After).
	Attempts            int
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt.
	Timeout time.Duration
	// Prepare, when set, completes a report (its log tail and events)
	// before its first attempt, in the sending goroutine: what it fetches
	// never holds up whoever enqueued the report.
	Prepare func(ctx context.Context, r *Report)
}

// DefaultDispatchOptions are berth-controller's defaults: a queue of 256,
// 5 attempts from 2 s up to 1 min apart, 10 s per attempt.
func DefaultDispatchOptions() DispatchOptions {
	return DispatchOptions{QueueSize: 256, Attempts: 5, Backoff: 2 * time.Second, MaxBackoff: time.Minute, Timeout: 10 * time.Second}
}

// delivery is one report on its way to one sink.
type delivery struct {
	sink    Sink
	report  *Report
	attempt int
}

// Dispatcher sends reports to sinks from a bounded queue, so that whoever
// reports (the notifier, on behalf of admission's controllers) never
// waits for a sink: Enqueue returns at once, a full queue drops the report
// and counts it, and a failed attempt is retried later from a timer, not
// by holding the sender.
type Dispatcher struct {
	opts    DispatchOptions
	metrics *metrics.Metrics
	log     logr.Logger
	queue   chan delivery

	mu     sync.Mutex
	closed bool
	// retries are the deliveries waiting on their retry timers.
	retries map[*time.Timer]delivery
}

// NewDispatcher returns a Dispatcher; Run sends what is enqueued.
func NewDispatcher(o DispatchOptions, m *metrics.Metrics, log logr.Logger) *Dispatcher {
	return &Dispatcher{opts: o, metrics: m, log: log, queue: make(chan delivery, o.QueueSize), retries: map[*time.Timer]delivery{}}
}

// Enqueue queues a report for a sink without waiting. It reports false,
// and counts the report as dropped, when the queue is full or the
// dispatcher stopped.
func (d *Dispatcher) Enqueue(s Sink, r *Report) bool {
	return d.offer(delivery{sink: s, report: r, attempt: 1})
}

func (d *Dispatcher) offer(dl delivery) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		select {
		case d.queue <- dl:
			return true
		default:
		}
	}
	d.metrics.Notification(dl.sink.Type(), metrics.NotificationDropped)
	return false
}

// Run sends queued reports until ctx ends. Deliveries still queued or
// waiting for a retry then are dropped and counted.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case dl := <-d.queue:
			d.send(ctx, dl)
		}
	}
}

func (d *Dispatcher) send(ctx context.Context, dl delivery) {
	actx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	if dl.attempt == 1 && d.opts.Prepare != nil {
		d.opts.Prepare(actx, dl.report)
	}
	err := dl.sink.Send(actx, dl.report)
	cancel()
	if err == nil {
		d.metrics.Notification(dl.sink.Type(), metrics.NotificationSent)
		return
	}
	var se *SendError
	retryable := errors.As(err, &se) && se.Retryable
	if !retryable || dl.attempt >= d.opts.Attempts || ctx.Err() != nil {
		d.metrics.Notification(dl.sink.Type(), metrics.NotificationFailed)
		d.log.Info("Could not deliver a failure report", "sink", dl.sink.Type(), "job", dl.report.Gang.Namespace+"/"+dl.report.Gang.JobName,
			"kind", dl.report.Kind, "attempts", dl.attempt, "error", err.Error())
		return
	}
	d.retry(dl, max(d.backoff(dl.attempt), se.RetryAfter))
}

// retry offers the delivery again after wait.
func (d *Dispatcher) retry(dl delivery, wait time.Duration) {
	dl.attempt++
	d.mu.Lock()
	defer d.mu.Unlock()
	var t *time.Timer
	t = time.AfterFunc(wait, func() {
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
	d.closed = true
	for t, dl := range d.retries {
		if t.Stop() {
			d.metrics.Notification(dl.sink.Type(), metrics.NotificationDropped)
		}
		delete(d.retries, t)
	}
	d.mu.Unlock()
	for {
		select {
		case dl := <-d.queue:
			d.metrics.Notification(dl.sink.Type(), metrics.NotificationDropped)
		default:
			return
		}
	}
}
