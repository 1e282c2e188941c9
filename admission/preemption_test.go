package admission

import (
	"slices"
	"strings"
	"testing"
)

// running returns w admitted in cq (flavor h200) at the given admission time.
func running(w Workload, cq string, at int64) Workload {
	w = admitted(w, cq)
	w.AdmissionTime = at
	return w
}

// TestPreemptionWithinClusterQueue: fewest, lowest-priority, most recently admitted.
func TestPreemptionWithinClusterQueue(t *testing.T) {
	v1 := running(job("v1", "a", 0, 1, 1, 4), "a", 10)
	v2 := running(job("v2", "a", 0, 2, 1, 2), "a", 20)
	v3 := running(job("v3", "a", 1, 3, 1, 2), "a", 30)
	tests := []struct {
		name        string
		mode        PreemptionMode
		p           Workload
		wantVictims []string
		wantReason  PendingReason
	}{
		{name: "fewest lowest priority", mode: PreemptLowerPriority, p: job("p", "a", 5, 9, 1, 4), wantVictims: []string{"v1"}, wantReason: WaitingForPreemption},
		{name: "most recent first", mode: PreemptLowerPriority, p: job("p", "a", 5, 9, 1, 2), wantVictims: []string{"v2"}, wantReason: WaitingForPreemption},
		{name: "several victims", mode: PreemptLowerPriority, p: job("p", "a", 5, 9, 1, 7), wantVictims: []string{"v2", "v1", "v3"}, wantReason: WaitingForPreemption},
		{name: "never", mode: PreemptNever, p: job("p", "a", 5, 9, 1, 4), wantReason: InsufficientQuota},
		{name: "would not fit after preemption", mode: PreemptLowerPriority, p: job("p", "a", 1, 9, 1, 7), wantReason: InsufficientQuota},
		{name: "equal priority not allowed", mode: PreemptLowerPriority, p: job("p", "a", 0, 0, 1, 2), wantReason: InsufficientQuota},
		{name: "newer equal priority allowed", mode: PreemptLowerOrNewerEqualPriority, p: job("p", "a", 0, 0, 1, 2), wantVictims: []string{"v2"}, wantReason: WaitingForPreemption},
		{name: "older equal priority protected", mode: PreemptLowerOrNewerEqualPriority, p: job("p", "a", 0, 5, 1, 2), wantReason: InsufficientQuota},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, preempt(PreemptionPolicy{WithinClusterQueue: tc.mode})))
			mustWL(t, e, v1, v2, v3, tc.p)
			res := cycle(t, e)
			if got := victimNames(res); !eqStrings(got, tc.wantVictims) {
				t.Fatalf("victims %v, want %v", got, tc.wantVictims)
			}
			if p, _ := pendingReason(res, "p"); p.Reason != tc.wantReason {
				t.Fatalf("preemptor reason %q, want %q", p.Reason, tc.wantReason)
			}
			for _, p := range res.Preemptions {
				if p.Reason != InClusterQueue || p.Preemptor != key("p") || p.Message == "" {
					t.Fatalf("preemption %+v", p)
				}
			}
			// The victims are evicted: the preemptor is admitted, the victims are not.
			evict(t, e, specMap(v1, v2, v3), res)
			res = cycle(t, e)
			if len(tc.wantVictims) > 0 && !slices.Contains(admittedNames(res), "p") {
				t.Fatalf("preemptor not admitted after eviction: %s", fmtResult(res))
			}
		})
	}
}

// TestReclaimWithinCohort: a queue takes back quota it lent.
func TestReclaimWithinCohort(t *testing.T) {
	tests := []struct {
		name        string
		mode        PreemptionMode
		preemptor   Workload
		wantVictims []string
		wantReason  PreemptionReason
	}{
		{name: "any priority", mode: PreemptAny, preemptor: job("p", "a", 0, 9, 1, 4), wantVictims: []string{"b2"}, wantReason: InCohortReclamation},
		{name: "lower priority only", mode: PreemptLowerPriority, preemptor: job("p", "a", 0, 9, 1, 4)},
		{name: "lower priority", mode: PreemptLowerPriority, preemptor: job("p", "a", 1, 9, 1, 4), wantVictims: []string{"b2"}, wantReason: InCohortReclamation},
		{name: "no reclaim beyond nominal", mode: PreemptAny, preemptor: job("p", "a", 0, 9, 1, 6)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, Options{})
			mustCQ(t, e, newCQ("a", "co", []string{"h200"}, []int64{4}, preempt(PreemptionPolicy{ReclaimWithinCohort: tc.mode})),
				newCQ("b", "co", []string{"h200"}, []int64{4}, preempt(PreemptionPolicy{ReclaimWithinCohort: PreemptAny})))
			b1, b2 := running(job("b1", "b", 0, 1, 1, 4), "b", 10), running(job("b2", "b", 0, 2, 1, 4), "b", 20)
			mustWL(t, e, b1, b2, tc.preemptor)
			res := cycle(t, e)
			if got := victimNames(res); !eqStrings(got, tc.wantVictims) {
				t.Fatalf("victims %v, want %v", got, tc.wantVictims)
			}
			if len(res.Preemptions) > 0 && res.Preemptions[0].Reason != tc.wantReason {
				t.Fatalf("reason %s", res.Preemptions[0].Reason)
			}
			// Stable: apply decisions for a few rounds; the evicted b2 cannot come back.
			specs := specMap(b1, b2, tc.preemptor)
			total := len(res.Preemptions)
			for range 5 {
				evict(t, e, specs, res)
				confirm(t, e, specs, res)
				res = cycle(t, e)
				total += len(res.Preemptions)
			}
			if total != len(tc.wantVictims) {
				t.Fatalf("%d preemptions over 6 rounds, want %d", total, len(tc.wantVictims))
			}
		})
	}
}

// TestFairSharingPreemptionNoLoop: two tenants borrowing from a third queue's idle
// quota. A naive rule ("preempt when my share is below the victim's") would make them
// preempt each other forever; the engine's rule (preemptor's share after admission
// strictly below the victim queue's share after preemption) preempts only when it
// makes shares more equal, so the system reaches a fixed point.
func TestFairSharingPreemptionNoLoop(t *testing.T) {
	tests := []struct {
		name         string
		aJobs        []Workload
		bJob         Workload
		wantVictims  []string
		wantBAdmited bool
	}{
		{
			name:  "would loop under a naive rule: no preemption",
			aJobs: []Workload{running(job("a1", "a", 0, 1, 1, 6), "a", 10)},
			bJob:  job("b1", "b", 0, 2, 1, 6),
		},
		{
			name: "equalising preemption happens once",
			aJobs: []Workload{running(job("a1", "a", 0, 1, 1, 2), "a", 10), running(job("a2", "a", 0, 2, 1, 2), "a", 20),
				running(job("a3", "a", 0, 3, 1, 2), "a", 30)},
			bJob:        job("b1", "b", 0, 4, 1, 2),
			wantVictims: []string{"a3"},
		},
	}
	fair := preempt(PreemptionPolicy{FairSharing: PreemptAny})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "co", []string{"h200"}, []int64{0}, fair), newCQ("b", "co", []string{"h200"}, []int64{0}, fair),
				newCQ("lender", "co", []string{"h200"}, []int64{6}))
			mustWL(t, e, tc.aJobs...)
			mustWL(t, e, tc.bJob)
			specs := specMap(append(slices.Clone(tc.aJobs), tc.bJob)...)
			var victims []string
			for range 10 {
				res := cycle(t, e)
				victims = append(victims, victimNames(res)...)
				for _, p := range res.Preemptions {
					if p.Reason != InCohortFairSharing {
						t.Fatalf("reason %s", p.Reason)
					}
				}
				evict(t, e, specs, res)
				confirm(t, e, specs, res)
			}
			if !eqStrings(victims, tc.wantVictims) {
				t.Fatalf("victims over 10 rounds %v, want %v", victims, tc.wantVictims)
			}
		})
	}
}

// TestPreemptorKeepsFreedQuota: quota released by the first of two victims is held
// for the preemptor; another queue of the cohort cannot take it meanwhile.
func TestPreemptorKeepsFreedQuota(t *testing.T) {
	e := newEngine(t, Options{})
	mustCQ(t, e, newCQ("a", "co", []string{"h200"}, []int64{8}, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})),
		newCQ("c", "co", []string{"h200"}, []int64{0}))
	v1, v2 := running(job("v1", "a", 0, 1, 1, 4), "a", 1), running(job("v2", "a", 0, 2, 1, 4), "a", 2)
	p := job("p", "a", 9, 3, 1, 8)
	mustWL(t, e, v1, v2, p)
	res := cycle(t, e)
	if got := victimNames(res); len(got) != 2 {
		t.Fatalf("victims %v", got)
	}
	v1.Admission, v2.Admission = nil, nil
	mustWL(t, e, v1)                            // first victim evicted
	mustWL(t, e, job("thief", "c", 0, 4, 1, 4)) // would borrow the freed 4 GPUs
	res = cycle(t, e)
	if len(res.Admitted) != 0 {
		t.Fatalf("admitted %v while the preemptor waits", admittedNames(res))
	}
	mustWL(t, e, v2) // second victim evicted
	res = cycle(t, e)
	if got := admittedNames(res); len(got) == 0 || got[0] != "p" {
		t.Fatalf("admitted %v, want p first", got)
	}
}

// TestRollbackOfEviction: if an eviction cannot be written, the victim stays and the
// preemptor plans again.
func TestRollbackOfEviction(t *testing.T) {
	e := newEngine(t, Options{})
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{4}, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})))
	v := running(job("v", "a", 0, 1, 1, 4), "a", 1)
	mustWL(t, e, v, job("p", "a", 9, 2, 1, 4))
	if got := victimNames(cycle(t, e)); !eqStrings(got, []string{"v"}) {
		t.Fatalf("victims %v", got)
	}
	if got := victimNames(cycle(t, e)); len(got) != 0 {
		t.Fatalf("victims proposed twice: %v", got)
	}
	e.Rollback(key("v"))
	if got := victimNames(cycle(t, e)); !eqStrings(got, []string{"v"}) {
		t.Fatalf("after rollback victims %v, want v again", got)
	}
}

// TestPreemptorClaimsFreeQuota: a preemptor whose plan counts on free quota besides
// what its victims free claims that quota. Without the claim, a lower-priority
// workload behind it takes the free quota in the same cycle, the preemptor still does
// not fit after the eviction and preempts again, round after round (found by
// FuzzConvergence).
func TestPreemptorClaimsFreeQuota(t *testing.T) {
	e := newEngine(t, Options{})
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})))
	v := running(job("v", "a", 0, 1, 1, 4), "a", 1)
	h, l := job("h", "a", 9, 2, 1, 8), job("l", "a", 5, 3, 1, 4)
	mustWL(t, e, v, h, l)
	specs := specMap(v, h, l)
	var victims, admittedAll []string
	for range 5 {
		res := cycle(t, e)
		victims = append(victims, victimNames(res)...)
		admittedAll = append(admittedAll, admittedNames(res)...)
		evict(t, e, specs, res)
		confirm(t, e, specs, res)
	}
	if !eqStrings(victims, []string{"v"}) || !eqStrings(admittedAll, []string{"h"}) {
		t.Fatalf("victims %v admitted %v, want [v] and [h]", victims, admittedAll)
	}
}

// TestReservationLiftedWhenPreemptorServed: a workload blocked behind a head
// that reserves for its preemption victims is released when the head is
// admitted once they are gone, and is admitted on the quota left beside it
// (it stayed blocked forever behind a head that was gone: found by the
// simulator's serving-reclaim scenario).
func TestReservationLiftedWhenPreemptorServed(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("serving", "co", []string{"h200"}, []int64{10}, borrowLimit(0), preempt(PreemptionPolicy{ReclaimWithinCohort: PreemptAny})),
		newCQ("training", "co", []string{"h200"}, []int64{0}, borrowLimit(9)))
	t0 := running(job("t0", "training", 0, 1, 1, 8), "training", 10)
	s0 := running(job("s0", "serving", 0, 2, 1, 1), "serving", 11)
	head := job("head", "serving", 5, 20, 1, 8)
	small := job("small", "serving", 0, 30, 1, 1)
	mustWL(t, e, t0, s0, head)
	specs := specMap(t0, s0, head, small)
	first := cycle(t, e)
	if got := victimNames(first); !eqStrings(got, []string{"t0"}) {
		t.Fatalf("victims %v, want [t0]: %s", got, fmtResult(first))
	}
	mustWL(t, e, small)
	res := cycle(t, e)
	if p, _ := pendingReason(res, "small"); p.Reason != ReservedForHead || !strings.Contains(p.Message, "preempted") {
		t.Fatalf("small: %+v, want ReservedForHead behind the preempting head", p)
	}
	evict(t, e, specs, first)
	var got []string
	for range 3 {
		res = cycle(t, e)
		got = append(got, admittedNames(res)...)
		confirm(t, e, specs, res)
	}
	if !slices.Contains(got, "head") || !slices.Contains(got, "small") {
		t.Fatalf("admitted %v, want head and then small: %s", got, fmtResult(res))
	}
}
