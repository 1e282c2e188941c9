package admission

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// bookingPolicy is the policy of the booking tests: 3 attempts, a 10 s backoff,
// 5 minutes of "no capacity" and 15 minutes without an answer.
var bookingPolicy = ProvisioningPolicy{Mode: ProvisionIfNeeded, MaxAttempts: 3, Backoff: 10 * time.Second,
	CapacityNotFoundTimeout: 5 * time.Minute, AnswerTimeout: 15 * time.Minute}

// bookingEngine has flavor h200 booking capacity by bookingPolicy from pools in
// racks r1 and r2, and no node: every rack-bound gang books new nodes.
func bookingEngine(t *testing.T) *Engine {
	t.Helper()
	e := topoEngine(t)
	if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}, Provisioning: bookingPolicy}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Pool{rackPool("pool-r1", "r1"), rackPool("pool-r2", "r2")} {
		if err := e.UpsertPool(p); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// reserveGang admits a gang of two 8-GPU pods that must run in one rack and
// confirms its booking; it returns the specs and the admission.
func reserveGang(t *testing.T, e *Engine, at time.Time) (map[string]Workload, Admission) {
	t.Helper()
	specs := specMap(gang("g", 2, 8, TopologyRequired, rackKey))
	mustWL(t, e, specs["g"])
	res := e.Cycle(at)
	if len(res.Admitted) != 1 || res.Admitted[0].Admission.Provisioning == nil {
		t.Fatalf("%s: want a booking", fmtResult(res))
	}
	confirm(t, e, specs, res)
	return specs, res.Admitted[0].Admission
}

// onlyBooking returns the single booking decision of a result.
func onlyBooking(t *testing.T, res Result) BookingDecision {
	t.Helper()
	if len(res.Bookings) != 1 {
		t.Fatalf("booking decisions %+v, want one", res.Bookings)
	}
	return res.Bookings[0]
}

func TestBookingDecisions(t *testing.T) {
	r1 := rackDomain("a", "r1")
	nf := func(since time.Time) BookingReport {
		return BookingReport{Attempt: 1, Answer: AnswerCapacityNotFound, Since: since.UnixNano(), Message: "Capacity is not found"}
	}
	tests := []struct {
		name   string
		report *BookingReport
		at     time.Duration // after the admission
		want   *BookingDecision
		detail string
	}{
		{name: "no request or no API yet: nothing to time, however long", at: 48 * time.Hour},
		{name: "provisioned: start", report: &BookingReport{Attempt: 1, Answer: AnswerProvisioned, Message: "created 2 nodes"},
			want: &BookingDecision{Action: BookingStart, State: BookingProvisioned}, detail: "created 2 nodes"},
		{name: "failed: retry elsewhere after the backoff", report: &BookingReport{Attempt: 1, Answer: AnswerFailed, Message: "noRetry"},
			want:   &BookingDecision{Action: BookingRetry, State: BookingFailed, Failures: 1, RetryAfter: int64(10 * time.Second)},
			detail: "failed: noRetry"},
		{name: "no capacity, within the bound: wait", report: ptrTo(nf(t0)), at: 4 * time.Minute},
		{name: "no capacity for the bound: failed in the rack", report: ptrTo(nf(t0)), at: 5 * time.Minute,
			want:   &BookingDecision{Action: BookingRetry, State: BookingCapacityNotFound, Failures: 1, RetryAfter: int64(5*time.Minute + 10*time.Second)},
			detail: "found no capacity for 5m0s (capacityNotFoundSeconds 300): Capacity is not found"},
		{name: "no capacity counted from when it was first seen", report: ptrTo(nf(t0.Add(3 * time.Minute))), at: 6 * time.Minute},
		{name: "no answer within the bound: wait", report: &BookingReport{Attempt: 1, Answer: AnswerNone, Since: t0.UnixNano()}, at: 14 * time.Minute},
		{name: "no answer at all: failed", report: &BookingReport{Attempt: 1, Answer: AnswerNone, Since: t0.UnixNano()}, at: 15 * time.Minute,
			want:   &BookingDecision{Action: BookingRetry, State: BookingNoAnswer, Failures: 1, RetryAfter: int64(15*time.Minute + 10*time.Second)},
			detail: "got no answer from the autoscaler within 15m0s"},
		{name: "expired before the gang started", report: &BookingReport{Attempt: 1, Answer: AnswerExpired},
			want: &BookingDecision{Action: BookingRetry, State: BookingExpired, Failures: 1, RetryAfter: int64(10 * time.Second)}},
		{name: "an answer about another attempt is ignored", report: &BookingReport{Attempt: 7, Answer: AnswerFailed}, at: time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := bookingEngine(t)
			reserveGang(t, e, t0)
			if tc.report != nil {
				e.ReportBooking(key("g"), *tc.report)
			}
			res := e.Cycle(t0.Add(tc.at))
			if tc.want == nil {
				if len(res.Bookings) != 0 {
					t.Fatalf("decided %+v, want nothing yet", res.Bookings)
				}
				return
			}
			d := onlyBooking(t, res)
			if d.Action != tc.want.Action || d.State != tc.want.State || d.Failures != tc.want.Failures || d.Attempt != 1 || d.MaxAttempts != 3 {
				t.Fatalf("decided %+v, want %+v", d, *tc.want)
			}
			if tc.want.RetryAfter != 0 && d.RetryAfter != t0.UnixNano()+tc.want.RetryAfter {
				t.Fatalf("retry after %v, want %v", time.Duration(d.RetryAfter-t0.UnixNano()), time.Duration(tc.want.RetryAfter))
			}
			if d.Action == BookingRetry && !slices.EqualFunc(d.FailedDomains, []TopologyAssignment{r1}, func(a, b TopologyAssignment) bool { return sameAssignment(&a, &b) }) {
				t.Fatalf("failed domains %+v, want r1", d.FailedDomains)
			}
			if !strings.Contains(d.Detail, tc.detail) {
				t.Fatalf("detail %q, want it to contain %q", d.Detail, tc.detail)
			}
			if again := e.Cycle(t0.Add(tc.at + time.Second)); len(again.Bookings) != 0 {
				t.Fatalf("decided twice: %+v", again.Bookings)
			}
		})
	}
}

// TestBookingFailover: a rack out of stock fails after the bound, the quota goes,
// and the next attempt books the other rack; a third failure gives up.
func TestBookingFailover(t *testing.T) {
	e := bookingEngine(t)
	specs, adm := reserveGang(t, e, t0)
	if got := adm.Topology.Domain; !slices.Equal(got, []string{"a", "r1"}) || adm.Provisioning.Attempt != 1 {
		t.Fatalf("first booking in %v, attempt %d", got, adm.Provisioning.Attempt)
	}
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerCapacityNotFound, Since: t0.UnixNano()})
	now := t0.Add(5 * time.Minute)
	d := onlyBooking(t, e.Cycle(now))

	// The caller writes the failure: no admission, the record the decision says.
	w := specs["g"]
	w.Admission = nil
	w.Booking.State, w.Booking.Failures, w.Booking.FailedDomains, w.Booking.RetryAfter = d.State, d.Failures, d.FailedDomains, d.RetryAfter
	mustWL(t, e, w)
	if res := e.Cycle(now.Add(5 * time.Second)); len(res.Admitted) != 0 {
		t.Fatalf("admitted during the backoff: %s", fmtResult(res))
	}
	res := e.Cycle(now.Add(10 * time.Second))
	if len(res.Admitted) != 1 {
		t.Fatalf("%s: want the second attempt", fmtResult(res))
	}
	second := res.Admitted[0].Admission
	if got := second.Topology.Domain; !slices.Equal(got, []string{"a", "r2"}) || second.Provisioning.Attempt != 2 {
		t.Fatalf("second booking in %v, attempt %d; want r2, attempt 2", got, second.Provisioning.Attempt)
	}
	specs["g"] = w
	confirm(t, e, specs, res)
	if b := e.workloads[key("g")].bk; b.Attempt != 2 || b.Failures != 1 {
		t.Fatalf("record after the second admission %+v", b)
	}

	// Two more failures in a row: no attempt left.
	e.ReportBooking(key("g"), BookingReport{Attempt: 2, Answer: AnswerFailed})
	d = onlyBooking(t, e.Cycle(now.Add(11*time.Second)))
	if d.Failures != 2 || d.GaveUp || d.RetryAfter != now.Add(11*time.Second+20*time.Second).UnixNano() {
		t.Fatalf("second failure %+v: want a 20 s backoff", d)
	}
	w = specs["g"]
	w.Admission = nil
	w.Booking.State, w.Booking.Failures, w.Booking.FailedDomains, w.Booking.RetryAfter = d.State, d.Failures, d.FailedDomains, d.RetryAfter
	mustWL(t, e, w)
	res = e.Cycle(now.Add(time.Minute))
	specs["g"] = w
	confirm(t, e, specs, res)
	e.ReportBooking(key("g"), BookingReport{Attempt: 3, Answer: AnswerFailed})
	d = onlyBooking(t, e.Cycle(now.Add(2*time.Minute)))
	if !d.GaveUp || d.RetryAfter != 0 || d.Failures != 3 {
		t.Fatalf("third failure %+v: want to give up", d)
	}
	w = specs["g"]
	w.Admission = nil
	w.Booking.GaveUp, w.Booking.Failures = true, 3
	mustWL(t, e, w)
	if _, ok := e.workloads[key("g")]; ok {
		t.Fatalf("a workload that gave up is still queued")
	}
	if err := checkInvariants(e); err != nil {
		t.Fatal(err)
	}
}

// TestStartedBookings: failures of a started gang's booking evict it; an expired
// booking its pods used does not, and frees the new nodes it held.
func TestStartedBookings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report BookingReport
		want   BookingState
	}{
		{name: "revoked", report: BookingReport{Attempt: 1, Answer: AnswerRevoked}, want: BookingRevoked},
		{name: "pods not ready", report: BookingReport{Attempt: 1, Answer: AnswerPodsNotReady, Message: "1 of 2 pods were Ready"}, want: BookingPodsNotReady},
		{name: "expired before any pod used it", report: BookingReport{Attempt: 1, Answer: AnswerExpired}, want: BookingExpired},
		{name: "expired after the pods used it", report: BookingReport{Attempt: 1, Answer: AnswerExpired, Consumed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := bookingEngine(t)
			specs, _ := reserveGang(t, e, t0)
			e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerProvisioned})
			if d := onlyBooking(t, e.Cycle(t0)); d.Action != BookingStart {
				t.Fatalf("decided %+v, want start", d)
			}
			w := specs["g"]
			w.Booking.State = BookingProvisioned
			mustWL(t, e, w)
			if got := e.topo.pools["pool-r1"].reserved; got != 2 {
				t.Fatalf("pool-r1 reserves %d nodes once provisioned, want 2 until they exist", got)
			}
			e.ReportBooking(key("g"), tc.report)
			res := e.Cycle(t0.Add(time.Minute))
			if tc.want == "" {
				if len(res.Bookings) != 0 {
					t.Fatalf("decided %+v, want nothing", res.Bookings)
				}
				if got := e.topo.pools["pool-r1"].reserved; got != 0 {
					t.Fatalf("pool-r1 still reserves %d nodes for an expired booking", got)
				}
				return
			}
			d := onlyBooking(t, res)
			if d.Action != BookingEvict || d.State != tc.want || d.Failures != 1 || d.RetryAfter == 0 {
				t.Fatalf("decided %+v, want an eviction for %s", d, tc.want)
			}
			if got := e.workloads[key("g")]; !got.evicting {
				t.Fatalf("the gang is not marked for eviction")
			}
			if err := checkInvariants(e); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBookingRollback: a decision that could not be written is decided again.
func TestBookingRollback(t *testing.T) {
	e := bookingEngine(t)
	reserveGang(t, e, t0)
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerFailed})
	first := onlyBooking(t, e.Cycle(t0))
	if res := e.Cycle(t0); len(res.Bookings) != 0 {
		t.Fatalf("decided again before a rollback: %+v", res.Bookings)
	}
	e.Rollback(key("g"))
	if again := onlyBooking(t, e.Cycle(t0)); again.Action != first.Action || again.Failures != first.Failures {
		t.Fatalf("after the rollback decided %+v, before %+v", again, first)
	}
}

// TestBookingRebuilt: after a restart the engine takes the record as written, and
// a bound that elapsed while it was down fails the attempt at once.
func TestBookingRebuilt(t *testing.T) {
	e := bookingEngine(t)
	_, adm := reserveGang(t, e, t0)
	restarted := bookingEngine(t)
	w := gang("g", 2, 8, TopologyRequired, rackKey)
	w.Admission = &adm
	w.Booking = &Booking{Attempt: 1, State: BookingPending, Flavor: "h200", Domain: adm.Topology, CapacityNotFoundSince: t0.UnixNano()}
	mustWL(t, restarted, w)
	if got := restarted.topo.pools["pool-r1"].reserved; got != 2 {
		t.Fatalf("pool-r1 reserves %d nodes after the restart, want the booking's 2", got)
	}
	// The controller re-reports what the request says; the first sighting is the
	// record's.
	restarted.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerCapacityNotFound})
	if d := onlyBooking(t, restarted.Cycle(t0.Add(10*time.Minute))); d.State != BookingCapacityNotFound {
		t.Fatalf("decided %+v, want a failure after the bound", d)
	}
}

// TestReservedGangIsPreempted: a gang waiting for capacity holds quota and can be
// a preemption victim like any admitted gang.
func TestReservedGangIsPreempted(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	cq := newCQ("a", "", []string{"h200"}, []int64{16}, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority}))
	cq.ResourceGroups = append(cq.ResourceGroups, ResourceGroup{CoveredResources: []ResourceName{cpu},
		Flavors: []FlavorQuotas{{Flavor: "cpu", Resources: map[ResourceName]Quota{cpu: {Nominal: 8000}}}}})
	mustCQ(t, e, cq)
	if err := e.UpsertFlavor(Flavor{Name: "h200", Provisioning: ProvisioningPolicy{Mode: ProvisionAlways}}); err != nil {
		t.Fatal(err)
	}
	low := job("low", "a", 0, 1, 1, 8)
	low.PodSets[0].Requests[cpu] = 8000
	high := Workload{Key: key("high"), ClusterQueue: "a", Priority: 5, CreationTime: 2,
		PodSets: []PodSet{{Name: "main", Count: 1, Requests: Resources{cpu: 8000}}}}
	specs := specMap(low, high)
	mustWL(t, e, low)
	res := cycle(t, e)
	if len(res.Admitted) != 1 || res.Admitted[0].Admission.Provisioning == nil {
		t.Fatalf("%s: want low reserved for a booking", fmtResult(res))
	}
	confirm(t, e, specs, res)
	mustWL(t, e, high)
	res = cycle(t, e)
	if got := victimNames(res); !eqStrings(got, []string{"low"}) {
		t.Fatalf("victims %v, want the gang waiting for capacity", got)
	}
	evict(t, e, specs, res)
	if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"high"}) {
		t.Fatalf("admitted %v after the eviction, want high", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestFailuresAfterStart: where the controller checks that a started gang's
// pods become Ready, only that proves a booking good; a gang whose pods never
// do fails again and again with a growing backoff until the engine gives up.
// Without the check a provisioned booking resets the count.
func TestFailuresAfterStart(t *testing.T) {
	for _, tc := range []struct {
		name        string
		checks      bool
		wantOnStart int32
	}{
		{"pods-ready checked: the count is kept", true, 1},
		{"no pods-ready check: a provisioned booking resets it", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := topoEngine(t)
			pol := bookingPolicy
			pol.ChecksPodsReady = tc.checks
			if err := e.UpsertFlavor(Flavor{Name: "h200", Levels: []string{zoneKey, rackKey, hostKey}, Provisioning: pol}); err != nil {
				t.Fatal(err)
			}
			if err := e.UpsertPool(rackPool("pool-r1", "r1")); err != nil {
				t.Fatal(err)
			}
			w := gang("g", 2, 8, TopologyRequired, rackKey)
			w.Booking = &Booking{Attempt: 1, Failures: 1, State: BookingFailed, Flavor: "h200"}
			specs := specMap(w)
			mustWL(t, e, w)
			res := e.Cycle(t0)
			confirm(t, e, specs, res)
			e.ReportBooking(key("g"), BookingReport{Attempt: 2, Answer: AnswerProvisioned})
			d := onlyBooking(t, e.Cycle(t0))
			if d.Action != BookingStart || d.Failures != tc.wantOnStart {
				t.Fatalf("decided %+v, want a start with %d failures", d, tc.wantOnStart)
			}
			w = specs["g"]
			w.Booking.State, w.Booking.Failures = BookingProvisioned, d.Failures
			mustWL(t, e, w)
			e.ReportBooking(key("g"), BookingReport{Attempt: 2, Answer: AnswerPodsNotReady, Message: "1 of 2 pods were Ready"})
			if d := onlyBooking(t, e.Cycle(t0.Add(time.Minute))); d.Action != BookingEvict || d.Failures != tc.wantOnStart+1 {
				t.Fatalf("decided %+v, want an eviction with %d failures", d, tc.wantOnStart+1)
			}
		})
	}
}

// TestLatePodsNotReady: a report that the pods were not Ready, arriving after
// the gang's PodsReady was recorded, evicts nothing.
func TestLatePodsNotReady(t *testing.T) {
	e := bookingEngine(t)
	specs, _ := reserveGang(t, e, t0)
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerProvisioned})
	onlyBooking(t, e.Cycle(t0))
	w := specs["g"]
	w.Booking.State, w.Booking.PodsReady = BookingProvisioned, true
	mustWL(t, e, w)
	e.ReportBooking(key("g"), BookingReport{Attempt: 1, Answer: AnswerPodsNotReady, Message: "1 of 2 pods were Ready"})
	if res := e.Cycle(t0.Add(time.Minute)); len(res.Bookings) != 0 || len(res.Preemptions) != 0 {
		t.Fatalf("decided %+v after PodsReady, want nothing", res.Bookings)
	}
}

// TestBookingDecisionsFollowAnswersAndBounds: with several bookings in
// flight, an answer about one decides that one alone, and a bound that
// elapses decides the bookings it bounds without any new answer.
func TestBookingDecisionsFollowAnswersAndBounds(t *testing.T) {
	e := bookingEngine(t)
	specs := specMap(gang("g1", 1, 8, TopologyRequired, rackKey), gang("g2", 1, 8, TopologyRequired, rackKey), gang("g3", 1, 8, TopologyRequired, rackKey))
	for _, name := range []string{"g1", "g2", "g3"} {
		mustWL(t, e, specs[name])
	}
	res := e.Cycle(t0)
	if len(res.Admitted) != 3 {
		t.Fatalf("%s: want three bookings", fmtResult(res))
	}
	confirm(t, e, specs, res)
	for _, name := range []string{"g1", "g2", "g3"} {
		e.ReportBooking(key(name), BookingReport{Attempt: 1, Answer: AnswerCapacityNotFound, Since: t0.UnixNano()})
	}
	if res := e.Cycle(t0.Add(time.Minute)); len(res.Bookings) != 0 {
		t.Fatalf("decisions %+v within the bound, want none", res.Bookings)
	}
	e.ReportBooking(key("g2"), BookingReport{Attempt: 1, Answer: AnswerProvisioned})
	if d := onlyBooking(t, e.Cycle(t0.Add(2*time.Minute))); d.Key != key("g2") || d.Action != BookingStart {
		t.Fatalf("decision %+v, want g2 to start", d)
	}
	res = e.Cycle(t0.Add(5 * time.Minute))
	var failed []string
	for _, d := range res.Bookings {
		if d.Action == BookingRetry && d.State == BookingCapacityNotFound {
			failed = append(failed, d.Key.Name)
		}
	}
	if !slices.Equal(failed, []string{"g1", "g3"}) || len(res.Bookings) != 2 {
		t.Fatalf("decisions %+v at the bound, want g1 and g3 failed for no capacity", res.Bookings)
	}
}
