package admission

import (
	"maps"
	"testing"
)

// TestClusterQueueUsageCountsInadmissibleAndShare: a borrows 4 GPUs of the
// cohort's 16 to run a 12-GPU job, so b's 8-GPU job does not fit for lack
// of quota and is set aside, and b's 100-GPU job never fits; a has a
// weighted share, b none.
func TestClusterQueueUsageCountsInadmissibleAndShare(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "c", []string{"f"}, []int64{8}), newCQ("b", "c", []string{"f"}, []int64{8}))
	mustWL(t, e, job("a1", "a", 0, 1, 1, 12))
	confirm(t, e, map[string]Workload{"a1": job("a1", "a", 0, 1, 1, 12)}, cycle(t, e))
	mustWL(t, e, job("b1", "b", 0, 2, 1, 8), job("b2", "b", 0, 3, 1, 100))
	if got := admittedNames(cycle(t, e)); len(got) != 0 {
		t.Fatalf("admitted %v, want none", got)
	}
	cases := []struct {
		cq                          string
		pending, inadmissible, held int
		neverFit                    map[PendingReason]int
		borrows                     bool
	}{
		{cq: "a", held: 1, borrows: true},
		{cq: "b", pending: 2, inadmissible: 2, neverFit: map[PendingReason]int{ExceedsMaxQuota: 1}},
	}
	for _, tc := range cases {
		u, ok := e.ClusterQueueUsage(tc.cq)
		if !ok {
			t.Fatalf("no usage for %s", tc.cq)
		}
		if u.Pending != tc.pending || u.Inadmissible != tc.inadmissible || u.Admitted != tc.held {
			t.Errorf("%s: pending %d (inadmissible %d), admitted %d; want %d (%d), %d", tc.cq, u.Pending, u.Inadmissible, u.Admitted, tc.pending, tc.inadmissible, tc.held)
		}
		if !maps.Equal(u.Held, tc.neverFit) {
			t.Errorf("%s: held %v, want %v", tc.cq, u.Held, tc.neverFit)
		}
		if got := u.DominantResourceShare > 0; got != tc.borrows {
			t.Errorf("%s: dominant resource share %d, want it positive: %v", tc.cq, u.DominantResourceShare, tc.borrows)
		}
	}
}

// TestClusterQueueUsageLeavesBookingsOutOfAdmitted: a gang that fits the
// node there is admitted at once, one that needs new nodes books them. The
// booking gang's quota is reserved (in Total) but not used (in Admitted)
// until its capacity is provisioned.
func TestClusterQueueUsageLeavesBookingsOutOfAdmitted(t *testing.T) {
	e := provEngine(t, ProvisionIfNeeded, []Node{sized(rackNode("n1", "a", "r1", 8), 8)}, rackPool("pool-r1", "r1"))
	specs := specMap(gang("fits", 1, 8, TopologyRequired, rackKey), gang("books", 2, 8, TopologyRequired, rackKey))
	steps := []struct {
		name            string
		do              func(t *testing.T)
		total, admitted int64 // GPUs
	}{
		{name: "the gang that fits is admitted", total: 8, admitted: 8, do: func(t *testing.T) {
			mustWL(t, e, specs["fits"])
			confirm(t, e, specs, cycle(t, e))
		}},
		{name: "the other gang books capacity", total: 24, admitted: 8, do: func(t *testing.T) {
			mustWL(t, e, specs["books"])
			res := cycle(t, e)
			if len(res.Admitted) != 1 || res.Admitted[0].Admission.Provisioning == nil {
				t.Fatalf("%s: want a booking", fmtResult(res))
			}
			confirm(t, e, specs, res)
		}},
		{name: "its capacity is provisioned", total: 24, admitted: 24, do: func(t *testing.T) {
			e.ReportBooking(key("books"), BookingReport{Attempt: 1, Answer: AnswerProvisioned})
			if d := onlyBooking(t, cycle(t, e)); d.Action != BookingStart {
				t.Fatalf("decided %+v, want start", d)
			}
			w := specs["books"]
			w.Booking.State = BookingProvisioned
			mustWL(t, e, w)
		}},
	}
	for _, s := range steps {
		s.do(t)
		u, ok := e.ClusterQueueUsage("a")
		if !ok || len(u.Flavors) != 1 || len(u.Flavors[0].Resources) != 1 {
			t.Fatalf("%s: usage %+v, want h200's GPUs", s.name, u)
		}
		r := u.Flavors[0].Resources[0]
		if r.Total != s.total*1000 || r.Admitted != s.admitted*1000 {
			t.Errorf("%s: total %d, admitted %d; want %d, %d", s.name, r.Total/1000, r.Admitted/1000, s.total, s.admitted)
		}
	}
}
