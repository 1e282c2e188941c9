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
