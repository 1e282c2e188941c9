package admission

import (
	"fmt"
	"math"
	"testing"
)

// TestFairShareSplit: queues borrowing from a common lender split what is free by
// weight, whatever their names or the order of their workloads.
func TestFairShareSplit(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		weights map[string]int64
		want    map[string]int
	}{
		{name: "equal weights", opts: DefaultOptions(), weights: map[string]int64{"a": 1000, "b": 1000}, want: map[string]int{"a": 6, "b": 6}},
		{name: "2:1", opts: DefaultOptions(), weights: map[string]int64{"a": 1000, "b": 2000}, want: map[string]int{"a": 4, "b": 8}},
		{name: "weight 0 takes only leftovers", opts: DefaultOptions(), weights: map[string]int64{"a": 0, "b": 1000}, want: map[string]int{"a": 2, "b": 10}},
		{name: "no fair sharing: round robin", opts: Options{}, weights: map[string]int64{"a": 1000, "b": 9000}, want: map[string]int{"a": 6, "b": 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.opts)
			mustCQ(t, e, newCQ("lender", "co", []string{"h200"}, []int64{12}))
			for _, q := range []string{"a", "b"} {
				mustCQ(t, e, newCQ(q, "co", []string{"h200"}, []int64{0}, weight(tc.weights[q])))
			}
			jobs := map[string]int{"a": 20, "b": 10}
			if tc.weights["a"] == 0 {
				jobs["b"] = 10 // b wants 10 of 12; a gets the 2 nobody else wants
			}
			for q, n := range jobs {
				for i := range n {
					mustWL(t, e, job(fmt.Sprintf("%s%d", q, i), q, 0, int64(i), 1, 1))
				}
			}
			got := map[string]int{}
			for _, a := range cycle(t, e).Admitted {
				got[a.Admission.ClusterQueue]++
			}
			if got["a"] != tc.want["a"] || got["b"] != tc.want["b"] {
				t.Fatalf("admitted per queue %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDominantResourceShare checks the share arithmetic.
func TestDominantResourceShare(t *testing.T) {
	tests := []struct {
		name   string
		share  uint64
		weight int64
		want   int64
	}{
		{name: "zero share", share: 0, weight: 0, want: 0},
		{name: "half at weight 1", share: 5e8, weight: 1000, want: 5e8},
		{name: "half at weight 2", share: 5e8, weight: 2000, want: 25e7},
		{name: "weight 0 borrowing", share: 1, weight: 0, want: math.MaxInt64},
		{name: "tiny weight saturates", share: 1e9, weight: 1, want: 1e12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := weighted(tc.share, tc.weight); got != tc.want {
				t.Fatalf("weighted(%d, %d) = %d, want %d", tc.share, tc.weight, got, tc.want)
			}
		})
	}
}

// TestTenantOrderFollowsShare: the tenant index serves the queue with the lowest
// share after admitting its head first.
func TestTenantOrderFollowsShare(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("lender", "co", []string{"h200"}, []int64{10}),
		newCQ("a", "co", []string{"h200"}, []int64{0}), newCQ("b", "co", []string{"h200"}, []int64{0}))
	mustWL(t, e, running(job("a-run", "a", 0, 0, 1, 4), "a", 1), job("a1", "a", 0, 1, 1, 1), job("b1", "b", 0, 1, 1, 1))
	ex, ok := e.Explain(key("a1"))
	if !ok || ex.FairShare.TenantsAhead != 1 || ex.FairShare.DominantResourceShare != 4e8 || ex.FairShare.Cohort != "co" {
		t.Fatalf("a1 fair share %+v", ex.FairShare)
	}
	if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"b1", "a1"}) {
		t.Fatalf("order %v, want b1 before a1", got)
	}
}
