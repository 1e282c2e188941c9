package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/controllers/metrics"
)

// recorder is an HTTPS server standing in for Slack or a webhook: it
// answers with the statuses given, in turn (then 200), and records the
// bodies it accepted.
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	bodies   []string
	got      chan struct{}
}

func newRecorder(t *testing.T, statuses ...int) *recorder {
	r := &recorder{statuses: statuses, got: make(chan struct{}, 100)}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		if status == http.StatusOK {
			r.bodies = append(r.bodies, string(body))
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		r.got <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) accepted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// secretPath is the part of a webhook URL that is a credential.
const secretPath = "/services/T000/B000/XXXXSECRETXXXX"

func TestSinks(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		retryable bool
		after     time.Duration
	}{
		{"accepted", http.StatusOK, false, 0},
		{"rate limited, with Retry-After", http.StatusTooManyRequests, true, time.Second},
		{"server error", http.StatusBadGateway, true, 0},
		{"refused (a revoked webhook)", http.StatusNotFound, false, 0},
	}
	for _, tc := range cases {
		for _, mk := range []func(string, *http.Client) Sink{
			func(u string, c *http.Client) Sink { return NewSlackSink(u, c) },
			func(u string, c *http.Client) Sink { return NewWebhookSink(u, c) },
		} {
			srv := newRecorder(t, tc.status)
			s := mk(srv.URL+secretPath, srv.Client())
			t.Run(s.Type()+": "+tc.name, func(t *testing.T) {
				err := s.Send(context.Background(), sampleReport())
				if tc.status == http.StatusOK {
					if err != nil {
						t.Fatalf("Send: %v", err)
					}
					if got := srv.accepted(); len(got) != 1 || !strings.Contains(got[0], "train-x") {
						t.Errorf("the server got %q, want one message about train-x", got)
					}
					return
				}
				var se *SendError
				if !errors.As(err, &se) {
					t.Fatalf("Send: %v, want a SendError", err)
				}
				if se.Status != tc.status || se.Retryable != tc.retryable || se.RetryAfter != tc.after {
					t.Errorf("SendError = %+v, want status %d, retryable %v, retry after %s", se, tc.status, tc.retryable, tc.after)
				}
			})
		}
	}
}

func TestSinkErrorsHideTheURL(t *testing.T) {
	srv := newRecorder(t)
	u := srv.URL + secretPath
	srv.Close() // nothing listens any more
	for _, s := range []Sink{NewSlackSink(u, srv.Client()), NewWebhookSink(u, srv.Client())} {
		err := s.Send(context.Background(), sampleReport())
		var se *SendError
		if !errors.As(err, &se) || !se.Retryable {
			t.Errorf("%s: Send = %v, want a retryable SendError", s.Type(), err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error shows the webhook URL: %v", s.Type(), err)
		}
	}
}

func TestWebhookPayload(t *testing.T) {
	srv := newRecorder(t)
	if err := NewWebhookSink(srv.URL, srv.Client()).Send(context.Background(), sampleReport()); err != nil {
		t.Fatal(err)
	}
	var p Payload
	if err := json.Unmarshal([]byte(srv.accepted()[0]), &p); err != nil {
		t.Fatal(err)
	}
	if p.Version != PayloadVersion || p.Affected != 3 || p.IdleGPUs != 40 || p.Job.Booking != "train-x-booking-1" ||
		len(p.Failures) != 3 || p.Failures[0].ExitCode != 137 {
		t.Errorf("payload = %+v", p)
	}
}

// blockingSink never returns until released.
type blockingSink struct{ release chan struct{} }

func (blockingSink) Type() string { return "webhook" }
func (b blockingSink) Send(ctx context.Context, _ *Report) error {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil
}

func fastOptions() DispatchOptions {
	return DispatchOptions{QueueSize: 2, Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Timeout: time.Minute}
}

func TestDispatcherRetriesUntilSent(t *testing.T) {
	m := metrics.New()
	srv := newRecorder(t, http.StatusServiceUnavailable, http.StatusBadGateway)
	d := NewDispatcher(fastOptions(), m, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	d.Enqueue("team-a/chat", NewSlackSink(srv.URL, srv.Client()), sampleReport())
	for range 3 {
		<-srv.got
	}
	NewWithT(t).Eventually(func() float64 {
		return testutil.ToFloat64(m.NotificationsTotal.WithLabelValues("slack", metrics.NotificationSent))
	}).WithTimeout(time.Minute).Should(BeEquivalentTo(1))
	if got := len(srv.accepted()); got != 1 {
		t.Errorf("%d messages accepted, want 1", got)
	}
}

func TestDispatcherGivesUp(t *testing.T) {
	m := metrics.New()
	srv := newRecorder(t, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway)
	d := NewDispatcher(fastOptions(), m, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	d.Enqueue("team-a/chat", NewWebhookSink(srv.URL, srv.Client()), sampleReport())
	NewWithT(t).Eventually(func() float64 {
		return testutil.ToFloat64(m.NotificationsTotal.WithLabelValues("webhook", metrics.NotificationFailed))
	}).WithTimeout(time.Minute).Should(BeEquivalentTo(1))
	if got := len(srv.got); got != 3 {
		t.Errorf("%d attempts, want Attempts = 3", got)
	}
}

func TestDispatcherNeverBlocks(t *testing.T) {
	m := metrics.New()
	sink := blockingSink{release: make(chan struct{})}
	d := NewDispatcher(fastOptions(), m, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	// One worker holds the namespace's one delivery in flight in the
	// blocked sink; the namespace's queue holds two more; every further
	// one is dropped at once.
	accepted := 0
	for range 10 {
		if d.Enqueue("team-a/chat", sink, sampleReport()) {
			accepted++
		}
	}
	if accepted < 2 || accepted > 3 {
		t.Errorf("%d of 10 accepted by a queue of 2 and one busy worker", accepted)
	}
	dropped := m.NotificationsTotal.WithLabelValues("webhook", metrics.NotificationDropped)
	if got := testutil.ToFloat64(dropped); int(got) != 10-accepted {
		t.Errorf("dropped = %v, want %d", got, 10-accepted)
	}
	cancel()
	<-done
	var counted float64
	for _, result := range []string{metrics.NotificationSent, metrics.NotificationFailed, metrics.NotificationDropped} {
		counted += testutil.ToFloat64(m.NotificationsTotal.WithLabelValues("webhook", result))
	}
	if counted != 10 {
		t.Errorf("%v of 10 reports counted once stopped, want every one (sent, failed or dropped)", counted)
	}
}
