package notify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
)

// shareStep is one operation on a rateShare: offer "ns:id" (want "full"
// when refused), release at arg seconds (want the ids let out, comma
// separated), or kept (want how many namespaces it still orders).
type shareStep struct{ op, arg, want string }

func TestRateShare(t *testing.T) {
	cases := []struct {
		name    string
		perHour int32
		steps   []shareStep
	}{
		{"a namespace that sent waits behind one that did not", 2, []shareStep{
			{"offer", "a:a1", ""}, {"offer", "a:a2", ""},
			{"release", "0", "a1,a2"},
			{"offer", "a:a3", ""}, {"offer", "a:a4", ""}, {"offer", "b:b1", ""},
			{"release", "0", ""},
			{"release", "1800", "b1"},
			{"release", "3600", "a3"},
		}},
		{"namespaces that both wait take turns", 2, []shareStep{
			{"offer", "a:a1", ""}, {"offer", "a:a2", ""}, {"offer", "b:b1", ""}, {"offer", "b:b2", ""},
			{"release", "0", "a1,b1"},
			{"release", "1800", "a2"},
			{"release", "3600", "b2"},
		}},
		{"each namespace bounded on its own, by the burst", 2, []shareStep{
			{"offer", "a:a1", ""}, {"offer", "a:a2", ""}, {"offer", "a:a3", "full"}, {"offer", "b:b1", ""},
		}},
		{"the burst is at most 10", 3600, []shareStep{
			{"offer", "a:a1", ""}, {"offer", "a:a2", ""}, {"offer", "a:a3", ""}, {"offer", "a:a4", ""}, {"offer", "a:a5", ""},
			{"offer", "a:a6", ""}, {"offer", "a:a7", ""}, {"offer", "a:a8", ""}, {"offer", "a:a9", ""}, {"offer", "a:a10", ""},
			{"offer", "a:a11", "full"},
		}},
		{"nothing is kept of namespaces once none waits and the burst is back", 60, []shareStep{
			{"offer", "a:a1", ""}, {"offer", "b:b1", ""},
			{"release", "0", "a1,b1"},
			{"kept", "", "2"},
			{"release", "60", ""},
			{"kept", "", "2"},
			{"release", "120", ""},
			{"kept", "", "0"},
		}},
		{"a namespace that sent before every waiting one is forgotten", 1, []shareStep{
			{"offer", "a:a1", ""}, {"release", "0", "a1"},
			{"offer", "b:b1", ""}, {"release", "3600", "b1"},
			{"offer", "b:b2", ""}, {"release", "3600", ""},
			{"kept", "", "1"}, // a sent before b, which waits
			{"offer", "a:a2", ""}, {"release", "7200", "a2"},
		}},
	}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newRateShare(tc.perHour)
			for i, st := range tc.steps {
				switch st.op {
				case "offer":
					ns, id, _ := strings.Cut(st.arg, ":")
					r := reportFor(ns)
					r.Gang.JobName = id
					if accepted := s.offer(r); accepted != (st.want != "full") {
						t.Fatalf("step %d: offer %s accepted=%v, want %q", i, st.arg, accepted, st.want)
					}
				case "release":
					secs, err := strconv.Atoi(st.arg)
					if err != nil {
						t.Fatal(err)
					}
					var ids []string
					for _, r := range s.release(start.Add(time.Duration(secs) * time.Second)) {
						ids = append(ids, r.Gang.JobName)
					}
					if got := strings.Join(ids, ","); got != st.want {
						t.Fatalf("step %d: release at %ss = %q, want %q", i, st.arg, got, st.want)
					}
				case "kept":
					if got := strconv.Itoa(len(s.byNS)); got != st.want {
						t.Fatalf("step %d: %s namespaces kept, want %s", i, got, st.want)
					}
				}
			}
		})
	}
}

// rateHarness drives a Notifier's aggregation and flush by hand on a fake
// clock, as Start would but without its goroutines, and takes the reports
// flush hands to the dispatcher as they come.
type rateHarness struct {
	n    *Notifier
	clk  *clocktesting.FakeClock
	sink *recordingSink
	sent []sentReport
}

// sentReport is a report the policy's rate let out, and when.
type sentReport struct {
	r  *Report
	at time.Time
}

func newRateHarness(t *testing.T, p Policy) *rateHarness {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	o := fastOptions()
	o.QueueSize = 1 << 20 // nothing is sent: the harness takes what is queued
	h := &rateHarness{clk: clk, sink: &recordingSink{},
		n: NewNotifier(reader, reader, nil, metrics.New(), logr.Discard(), NotifierOptions{Clock: clk, Dispatch: o})}
	h.n.SetPolicy(p, h.sink)
	return h
}

// fail records a failure of kind of a pod of the gang uid in namespace ns,
// now.
func (h *rateHarness) fail(ns, uid string, kind Kind) {
	h.n.gangsMu.Lock()
	h.n.gangs[types.UID(uid)] = Gang{UID: types.UID(uid), Namespace: ns, JobKind: "Job", JobName: uid, ClusterQueue: "gpu"}
	h.n.gangsMu.Unlock()
	h.n.add(context.Background(), observed{gang: types.UID(uid), f: Failure{Kind: kind, Pod: uid + "-0", At: h.clk.Now()}})
}

// tick advances the clock by one tick and flushes.
func (h *rateHarness) tick() {
	h.clk.Step(tick)
	h.n.flush()
	h.n.dispatch.mu.Lock()
	defer h.n.dispatch.mu.Unlock()
	for _, d := range h.n.dispatch.queue.drain() {
		h.sent = append(h.sent, sentReport{r: d.report, at: h.clk.Now()})
	}
}

// run ticks through secs seconds, calling each with the second (from 0)
// before its tick.
func (h *rateHarness) run(secs int, each func(sec int)) {
	for sec := range secs {
		each(sec)
		h.tick()
	}
}

func (h *rateHarness) dropped() int {
	return int(testutil.ToFloat64(h.n.metrics.NotificationsTotal.WithLabelValues("webhook", metrics.NotificationDropped)))
}

func (h *rateHarness) waiting() int {
	h.n.policyMu.Lock()
	defer h.n.policyMu.Unlock()
	total := 0
	for _, ps := range h.n.policies {
		total += ps.rate.waiting()
	}
	return total
}

// platformPolicy is a ClusterNotificationPolicy of perHour reports an
// hour selecting every namespace.
func platformPolicy(perHour int32) Policy {
	return Policy{Key: "platform", Namespaces: labels.Everything(),
		Settings: berthv1.NotificationSettings{DedupWindowSeconds: 300, MaxReportsPerHour: perHour}}
}

// TestClusterPolicyRateIsSharedByNamespaces: a tenant of team-a floods a
// ClusterNotificationPolicy of 60 reports an hour; each report of team-b
// still goes out, within one interval of the rate (a minute) of being due,
// and the platform's sink gets no more than the rate and its burst in the
// hour.
func TestClusterPolicyRateIsSharedByNamespaces(t *testing.T) {
	cases := []struct {
		name  string
		flood func(h *rateHarness, sec int)
	}{
		{"a dozen crash-looping jobs", func(h *rateHarness, sec int) {
			for i := range 12 {
				if since := sec - 25*i; since >= 0 && since%10 == 0 {
					h.fail("team-a", fmt.Sprintf("crash-%d", i), CrashLoopBackOff)
				}
			}
		}},
		{"its Workloads deactivated in turn", func(h *rateHarness, sec int) {
			if sec%5 == 0 {
				h.fail("team-a", fmt.Sprintf("toggled-%d", sec/5%100), Evicted)
			}
		}},
	}
	quiet := map[int]string{1000: "oom-1", 2222: "oom-2"} // second: gang
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newRateHarness(t, platformPolicy(60))
			start := h.clk.Now()
			h.run(3600, func(sec int) {
				tc.flood(h, sec)
				if uid, ok := quiet[sec]; ok {
					h.fail("team-b", uid, OOMKilled)
				}
			})
			for sec, uid := range quiet {
				due := start.Add(time.Duration(sec)*time.Second + settle)
				var got *sentReport
				for i := range h.sent {
					if h.sent[i].r.Gang.JobName == uid {
						got = &h.sent[i]
					}
				}
				switch {
				case got == nil:
					t.Errorf("team-b's report on %s was not sent", uid)
				case got.at.Sub(due) > time.Minute+tick:
					t.Errorf("team-b's report on %s was sent %s after it was due, want at most a minute", uid, got.at.Sub(due))
				}
			}
			if len(h.sent) > 60+maxBurst {
				t.Errorf("%d reports in an hour, want at most 60 and a burst of %d", len(h.sent), maxBurst)
			}
			if h.dropped() == 0 {
				t.Error("none of team-a's flood dropped")
			}
		})
	}
}

// TestFloodingNamespaceLosesItsOwnExcess: reports beyond what the rate
// lets out and the namespace's queue holds (the burst) are dropped and
// counted; those the queue holds go out at the rate.
func TestFloodingNamespaceLosesItsOwnExcess(t *testing.T) {
	cases := []struct {
		name   string
		policy Policy
		burst  int
	}{
		{"ClusterNotificationPolicy of 60 an hour", platformPolicy(60), 10},
		{"ClusterNotificationPolicy of 3 an hour", platformPolicy(3), 3},
		{"NotificationPolicy of 60 an hour", tenantPolicy(60), 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newRateHarness(t, tc.policy)
			burst := func(sec int) {
				if sec == 0 || sec == 10 {
					for i := range 30 {
						h.fail("team-a", fmt.Sprintf("wl-%d-%d", sec, i), Restarted)
					}
				}
			}
			h.run(20, burst)
			if len(h.sent) != tc.burst || h.waiting() != tc.burst || h.dropped() != 60-2*tc.burst {
				t.Errorf("sent %d, waiting %d, dropped %d; want %d sent at once, %d waiting, the other %d dropped",
					len(h.sent), h.waiting(), h.dropped(), tc.burst, tc.burst, 60-2*tc.burst)
			}
			interval := time.Hour / time.Duration(tc.policy.Settings.MaxReportsPerHour)
			h.run(int((time.Duration(tc.burst)*interval)/time.Second), func(int) {})
			if len(h.sent) != 2*tc.burst || h.waiting() != 0 || h.dropped() != 60-2*tc.burst {
				t.Errorf("after %d intervals: sent %d, waiting %d, dropped %d; want %d sent, the rest dropped",
					tc.burst, len(h.sent), h.waiting(), h.dropped(), 2*tc.burst)
			}
		})
	}
}

// TestChangedPolicyAndItsWaitingReports: removing a policy drops (and
// counts) its reports waiting, which are never sent; a changed rate keeps
// those its queues hold.
func TestChangedPolicyAndItsWaitingReports(t *testing.T) {
	cases := []struct {
		name        string
		change      func(h *rateHarness)
		wantDropped int // of the 10 waiting
		wantSent    int // of the 10 waiting, an hour later
	}{
		{"removed", func(h *rateHarness) { h.n.SetPolicy(platformPolicy(60), nil) }, 10, 0},
		{"removed and added again", func(h *rateHarness) {
			h.n.SetPolicy(platformPolicy(60), nil)
			h.n.SetPolicy(platformPolicy(60), h.sink)
		}, 10, 0},
		{"rate lowered", func(h *rateHarness) { h.n.SetPolicy(platformPolicy(2), h.sink) }, 8, 2},
		{"sink replaced", func(h *rateHarness) { h.n.SetPolicy(platformPolicy(60), &recordingSink{}) }, 0, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newRateHarness(t, platformPolicy(60))
			h.run(20, func(sec int) {
				if sec == 0 || sec == 10 {
					for i := range 10 {
						h.fail("team-a", fmt.Sprintf("wl-%d-%d", sec, i), Restarted)
					}
				}
			})
			if len(h.sent) != 10 || h.waiting() != 10 || h.dropped() != 0 {
				t.Fatalf("sent %d, waiting %d, dropped %d before the change; want 10, 10, 0", len(h.sent), h.waiting(), h.dropped())
			}
			h.sent = nil
			tc.change(h)
			if got := h.dropped(); got != tc.wantDropped {
				t.Errorf("dropped %d, want %d", got, tc.wantDropped)
			}
			h.run(3600, func(int) {})
			if len(h.sent) != tc.wantSent || h.waiting() != 0 {
				t.Errorf("sent %d, waiting %d an hour after; want %d sent, none waiting", len(h.sent), h.waiting(), tc.wantSent)
			}
		})
	}
}

// TestNamespaceAloneHasTheWholeRate: a NotificationPolicy, or a
// ClusterNotificationPolicy with one namespace reporting, sends as many
// reports in an hour of flood as the rate and its burst allow: sharing
// takes nothing from a namespace that is alone.
func TestNamespaceAloneHasTheWholeRate(t *testing.T) {
	cases := []struct {
		name   string
		policy Policy
	}{
		{"NotificationPolicy", tenantPolicy(60)},
		{"ClusterNotificationPolicy", platformPolicy(60)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newRateHarness(t, tc.policy)
			h.run(3600, func(sec int) { h.fail("team-a", fmt.Sprintf("wl-%d", sec), Restarted) })
			// The burst of 10 at 5 s, then one a minute from 65 s to 3545 s.
			if got := len(h.sent); got != 10+59 {
				t.Errorf("%d reports sent in an hour, want %d", got, 10+59)
			}
		})
	}
}
