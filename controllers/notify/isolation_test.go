package notify

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-dev/berth/controllers/metrics"
)

// hangingSink blocks every Send until the test ends, whatever its
// context says: the worst a sink can do to a worker.
type hangingSink struct {
	entered chan struct{}
	release chan struct{}
}

func newHangingSink(t *testing.T) *hangingSink {
	s := &hangingSink{entered: make(chan struct{}, 100), release: make(chan struct{})}
	t.Cleanup(func() { close(s.release) })
	return s
}

func (*hangingSink) Type() string { return "webhook" }

func (s *hangingSink) Send(context.Context, *Report) error {
	s.entered <- struct{}{}
	<-s.release
	return nil
}

func reportFor(ns string) *Report {
	r := sampleReport()
	r.Gang.Namespace = ns
	return r
}

func startDispatcher(t *testing.T, o DispatchOptions, m *metrics.Metrics) *Dispatcher {
	d := NewDispatcher(o, m, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go d.Run(ctx)
	return d
}

// TestHangingSinkDoesNotDelayAnotherNamespace: team-a's sink hangs for
// the whole test with several reports queued behind it; team-b's report
// arrives all the same, while team-a's still hang.
func TestHangingSinkDoesNotDelayAnotherNamespace(t *testing.T) {
	for _, workers := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			o := fastOptions()
			o.Workers, o.QueueSize = workers, 8
			d := startDispatcher(t, o, metrics.New())
			hanging, other := newHangingSink(t), &recordingSink{}
			for range 5 {
				d.Enqueue("team-a/chat", hanging, reportFor("team-a"))
			}
			<-hanging.entered
			d.Enqueue("team-b/chat", other, reportFor("team-b"))
			NewWithT(t).Eventually(func() int { return len(other.headlines()) }).WithTimeout(5 * time.Second).Should(Equal(1))
			if n := len(hanging.entered); n != 0 {
				t.Errorf("%d more of team-a's deliveries started while its first hangs, want none", n)
			}
		})
	}
}

// failingSink fails every attempt until ok is set, and counts attempts.
type failingSink struct {
	mu       sync.Mutex
	ok       bool
	attempts int
}

func (*failingSink) Type() string { return "slack" }

func (s *failingSink) Send(context.Context, *Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.ok {
		return nil
	}
	return &SendError{Status: http.StatusNotFound}
}

func (s *failingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// TestBreakerSkipsAFailingSink: after BreakerFailures failed deliveries
// the sink is not tried for the cool-down, its reports are counted as
// dropped and the open breaker is visible; after the cool-down one
// success closes it.
func TestBreakerSkipsAFailingSink(t *testing.T) {
	m := metrics.New()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var outcomes []string
	o := fastOptions()
	o.Attempts, o.BreakerFailures, o.BreakerCooldown, o.Clock = 1, 2, time.Hour, clk
	o.Outcome = func(policy string, err error) {
		mu.Lock()
		defer mu.Unlock()
		outcomes = append(outcomes, policy+": "+OutcomeOf(err).Reason)
	}
	d := startDispatcher(t, o, m)
	sink := &failingSink{}
	g := NewWithT(t)
	count := func(result string) func() float64 {
		return func() float64 { return testutil.ToFloat64(m.NotificationsTotal.WithLabelValues("slack", result)) }
	}
	for i := range 2 {
		d.Enqueue("team-a/chat", sink, reportFor("team-a"))
		g.Eventually(count(metrics.NotificationFailed)).Should(BeEquivalentTo(i + 1))
	}
	g.Expect(testutil.ToFloat64(m.NotificationBreakersOpen.WithLabelValues("slack"))).To(BeEquivalentTo(1))
	g.Expect(testutil.ToFloat64(m.NotificationBreakerTripsTotal.WithLabelValues("slack"))).To(BeEquivalentTo(1))
	for i := range 3 {
		d.Enqueue("team-a/chat", sink, reportFor("team-a"))
		g.Eventually(count(metrics.NotificationDropped)).Should(BeEquivalentTo(i + 1))
	}
	g.Expect(sink.count()).To(Equal(2), "attempts while the breaker is open")

	clk.Step(time.Hour)
	sink.mu.Lock()
	sink.ok = true
	sink.mu.Unlock()
	d.Enqueue("team-a/chat", sink, reportFor("team-a"))
	g.Eventually(count(metrics.NotificationSent)).Should(BeEquivalentTo(1))
	g.Expect(testutil.ToFloat64(m.NotificationBreakersOpen.WithLabelValues("slack"))).To(BeEquivalentTo(0))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(outcomes).To(Equal([]string{"team-a/chat: DeliveryFailed", "team-a/chat: DeliveryFailed", "team-a/chat: Delivered"}))
}

// TestTimeoutFreesTheWorker: with one worker, a sink that hangs until its
// attempt's context ends holds the worker for Timeout only.
func TestTimeoutFreesTheWorker(t *testing.T) {
	o := fastOptions()
	o.Workers, o.Attempts, o.Timeout = 1, 1, 50*time.Millisecond
	d := startDispatcher(t, o, metrics.New())
	slow, other := blockingSink{release: make(chan struct{})}, &recordingSink{}
	d.Enqueue("team-a/chat", slow, reportFor("team-a"))
	d.Enqueue("team-b/chat", other, reportFor("team-b"))
	NewWithT(t).Eventually(func() int { return len(other.headlines()) }).WithTimeout(5 * time.Second).Should(Equal(1))
}
