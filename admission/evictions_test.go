package admission

import (
	"slices"
	"testing"
	"time"
)

// admittedEngine has workloads a and b admitted and confirmed in ClusterQueue
// cq, and c in other.
func admittedEngine(t *testing.T) (*Engine, map[string]Workload) {
	t.Helper()
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("cq", "", []string{"f"}, []int64{4}), newCQ("other", "", []string{"f"}, []int64{4}))
	a, b, c := job("a", "cq", 0, 1, 1, 1), job("b", "cq", 0, 2, 1, 1), job("c", "other", 0, 3, 1, 1)
	for _, w := range []*Workload{&a, &b, &c} {
		w.LocalQueue = "lq"
	}
	specs := specMap(a, b, c)
	mustWL(t, e, a, b, c)
	confirm(t, e, specs, cycle(t, e))
	return e, specs
}

// admittedAs is the API's copy of an admitted workload: the spec with the
// admission confirm wrote into it, which the engine must still hold.
func admittedAs(t *testing.T, e *Engine, w Workload) Workload {
	t.Helper()
	if w.Admission == nil {
		t.Fatalf("%s has no admission", w.Key.Name)
	}
	if in := e.workloads[w.Key]; in == nil || in.phase != phaseAdmitted || in.admCQ != w.Admission.ClusterQueue {
		t.Fatalf("%s: the engine does not hold its admission in %s", w.Key.Name, w.Admission.ClusterQueue)
	}
	return w
}

func evictionNames(r Result) []string {
	var out []string
	for _, ev := range r.Evictions {
		out = append(out, ev.Key.Name+" "+string(ev.Reason)+": "+ev.Message)
	}
	return out
}

func TestEvictions(t *testing.T) {
	cases := []struct {
		name string
		// feed gives the engine the facts.
		feed func(t *testing.T, e *Engine, specs map[string]Workload)
		want []string
	}{
		{name: "nothing to evict", feed: func(*testing.T, *Engine, map[string]Workload) {}},
		{name: "a deactivated admitted workload", feed: func(t *testing.T, e *Engine, specs map[string]Workload) {
			w := admittedAs(t, e, specs["a"])
			w.Inactive = true
			mustWL(t, e, w)
		}, want: []string{"a Deactivated: the Workload was deactivated (spec.active is false)"}},
		{name: "a drained ClusterQueue evicts what it admitted, in key order", feed: func(t *testing.T, e *Engine, _ map[string]Workload) {
			mustCQ(t, e, newCQ("cq", "", []string{"f"}, []int64{4}, func(cq *ClusterQueue) { cq.Stopped, cq.Drain = true, true }))
		}, want: []string{"a ClusterQueueStopped: ClusterQueue cq is stopped with stopPolicy HoldAndDrain",
			"b ClusterQueueStopped: ClusterQueue cq is stopped with stopPolicy HoldAndDrain"}},
		{name: "a held ClusterQueue evicts nothing", feed: func(t *testing.T, e *Engine, _ map[string]Workload) {
			mustCQ(t, e, newCQ("cq", "", []string{"f"}, []int64{4}, func(cq *ClusterQueue) { cq.Stopped = true }))
		}},
		{name: "a drained LocalQueue", feed: func(t *testing.T, e *Engine, specs map[string]Workload) {
			w := admittedAs(t, e, specs["c"])
			w.LocalQueueState = LocalQueueHoldAndDrain
			mustWL(t, e, w)
		}, want: []string{"c LocalQueueStopped: LocalQueue lq is stopped with stopPolicy HoldAndDrain"}},
		{name: "a held or missing LocalQueue and a refused namespace evict nothing", feed: func(t *testing.T, e *Engine, specs map[string]Workload) {
			a, b := admittedAs(t, e, specs["a"]), admittedAs(t, e, specs["b"])
			a.LocalQueueState, b.LocalQueueState, b.NamespaceRefusal = LocalQueueHold, LocalQueueMissing, NamespaceNotSelected
			mustWL(t, e, a, b)
		}},
		{name: "a job that grew", feed: func(_ *testing.T, e *Engine, _ map[string]Workload) {
			e.ReportChange(key("a"), Change{Kind: ChangeGrew, Detail: "pod set main: 2 pods, admitted for 1"})
		}, want: []string{"a Resized: the job grew (pod set main: 2 pods, admitted for 1): it is stopped and queued again for its new size"}},
		{name: "a job whose template moved", feed: func(_ *testing.T, e *Engine, _ map[string]Workload) {
			e.ReportChange(key("a"), Change{Kind: ChangeMoved, Detail: "main"})
		}, want: []string{"a Resized: the pod template of pod set main changed where its pods may run: the job is stopped and queued again as it is now"}},
		{name: "a job that changed before it started", feed: func(_ *testing.T, e *Engine, _ map[string]Workload) {
			e.ReportChange(key("a"), Change{Kind: ChangeBeforeStart})
		}, want: []string{"a Resized: the job changed after it was admitted: it is queued again as it is now"}},
		{name: "a running job that became invalid", feed: func(_ *testing.T, e *Engine, _ map[string]Workload) {
			e.ReportChange(key("a"), Change{Kind: ChangeInvalid, Detail: "pods disagree"})
		}, want: []string{"a InvalidSpec: the running job can no longer be queued as it is (pods disagree): it is stopped and queued again once it can be"}},
		{name: "a report about a workload that is not admitted is ignored", feed: func(t *testing.T, e *Engine, _ map[string]Workload) {
			mustWL(t, e, job("p", "cq", 0, 9, 1, 8))
			e.ReportChange(key("p"), Change{Kind: ChangeGrew, Detail: "x"})
			e.ReportChange(key("gone"), Change{Kind: ChangeGrew, Detail: "x"})
		}},
		{name: "a workload already being evicted is not evicted again", feed: func(t *testing.T, e *Engine, specs map[string]Workload) {
			w := admittedAs(t, e, specs["a"])
			w.Inactive, w.Evicting = true, true
			mustWL(t, e, w)
		}},
		{name: "deactivation comes before a drain", feed: func(t *testing.T, e *Engine, specs map[string]Workload) {
			w := admittedAs(t, e, specs["c"])
			w.Inactive, w.LocalQueueState = true, LocalQueueHoldAndDrain
			mustWL(t, e, w)
		}, want: []string{"c Deactivated: the Workload was deactivated (spec.active is false)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, specs := admittedEngine(t)
			tc.feed(t, e, specs)
			res := cycle(t, e)
			if got := evictionNames(res); !slices.Equal(got, tc.want) {
				t.Fatalf("evictions %q, want %q", got, tc.want)
			}
			if len(res.Preemptions)+len(res.Bookings) != 0 {
				t.Errorf("other decisions %s", fmtResult(res))
			}
			if again := cycle(t, e); len(again.Evictions) != 0 {
				t.Errorf("evicted again: %q", evictionNames(again))
			}
		})
	}
}

// TestEvictionLifecycle: an eviction is decided once, again after a
// rollback, and is over when the workload is upserted without admission; the
// quota stays counted until then.
func TestEvictionLifecycle(t *testing.T) {
	e, specs := admittedEngine(t)
	w := admittedAs(t, e, specs["a"])
	w.Inactive = true
	mustWL(t, e, w)
	if res := cycle(t, e); len(res.Evictions) != 1 {
		t.Fatalf("evictions %q, want one", evictionNames(res))
	}
	e.Rollback(key("a"))
	if res := cycle(t, e); len(res.Evictions) != 1 {
		t.Fatalf("after a rollback: evictions %q, want the eviction again", evictionNames(res))
	}
	if u, _ := e.ClusterQueueUsage("cq"); u.Admitted != 2 {
		t.Errorf("admitted in cq = %d while the eviction is written, want 2", u.Admitted)
	}
	w.Admission = nil // the eviction is over; still inactive
	mustWL(t, e, w)
	res := cycle(t, e)
	if u, _ := e.ClusterQueueUsage("cq"); u.Admitted != 1 || len(res.Evictions) != 0 {
		t.Errorf("admitted in cq = %d, evictions %q; want 1, none", u.Admitted, evictionNames(res))
	}
	if reason, held := e.Held(key("a")); !held || reason != Deactivated {
		t.Errorf("Held(a) = %s %v, want Deactivated", reason, held)
	}
}

// TestPodsCounted: at the deadline the engine decides from the count of
// Ready pods whether the gang's booking proved good or the gang is evicted.
func TestPodsCounted(t *testing.T) {
	deadline := t0.Add(time.Minute)
	for _, tc := range []struct {
		name       string
		ready      int32
		at         time.Time
		wantAction BookingAction
		wantDetail string
	}{
		{name: "before the deadline nothing is decided", ready: 0, at: t0},
		{name: "every pod Ready", ready: 2, at: deadline, wantAction: BookingPodsReady, wantDetail: "all 2 pods were Ready in time"},
		{name: "not every pod Ready", ready: 1, at: deadline.Add(time.Second), wantAction: BookingEvict,
			wantDetail: "started, but 1 of 2 pods were Ready 1m0s after admission (podsReadySeconds 60)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := bookingEngine(t)
			specs, _ := reserveGang(t, e, t0)
			e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerProvisioned})
			onlyBooking(t, e.Cycle(t0))
			w := specs["g"]
			w.Booking.State = BookingProvisioned
			mustWL(t, e, w)
			e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerPodsCounted, Ready: tc.ready,
				Deadline: deadline.UnixNano(), ReadySeconds: 60})
			res := e.Cycle(tc.at)
			if tc.wantAction == 0 {
				if len(res.Bookings) != 0 || e.NextWake() != deadline.UnixNano() {
					t.Fatalf("decided %+v, next wake %d; want nothing until the deadline", res.Bookings, e.NextWake())
				}
				return
			}
			d := onlyBooking(t, res)
			if d.Action != tc.wantAction || d.Detail != tc.wantDetail {
				t.Fatalf("decided %+v, want %d %q", d, tc.wantAction, tc.wantDetail)
			}
			if tc.wantAction == BookingEvict && d.State != BookingPodsNotReady {
				t.Errorf("state %s, want PodsNotReady", d.State)
			}
			w.Booking.PodsReady = tc.wantAction == BookingPodsReady
			mustWL(t, e, w)
			if res := e.Cycle(tc.at.Add(time.Second)); len(res.Bookings) != 0 && tc.wantAction == BookingPodsReady {
				t.Errorf("decided again after PodsReady was recorded: %+v", res.Bookings)
			}
		})
	}
}

// TestPodsCountedBesideAnswers: a count of Ready pods does not hide the
// autoscaler's answer about the same booking, reported in the same breath.
func TestPodsCountedBesideAnswers(t *testing.T) {
	e := bookingEngine(t)
	specs, _ := reserveGang(t, e, t0)
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerProvisioned})
	onlyBooking(t, e.Cycle(t0))
	w := specs["g"]
	w.Booking.State = BookingProvisioned
	mustWL(t, e, w)
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerRevoked, Message: "taken back"})
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerPodsCounted, Ready: 2, Deadline: t0.UnixNano(), ReadySeconds: 60})
	if d := onlyBooking(t, e.Cycle(t0.Add(time.Minute))); d.Action != BookingEvict || d.State != BookingRevoked {
		t.Fatalf("decided %+v, want the revoked booking's eviction", d)
	}
}
