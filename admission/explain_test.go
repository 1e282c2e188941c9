package admission

import (
	"slices"
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e,
		newCQ("a", "co", []string{"h100", "h200"}, []int64{4, 8}, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})),
		newCQ("b", "co", []string{"h100", "h200"}, []int64{0, 0}))
	mustWL(t, e, running(job("low", "a", 0, 0, 1, 8), "a", 1), job("p", "a", 5, 1, 2, 8), job("q", "a", 5, 2, 1, 16))
	mustWL(t, e, job("small", "a", 0, 3, 1, 2))
	cycle(t, e)

	ex, ok := e.Explain(key("q"))
	if !ok {
		t.Fatal("q not explained")
	}
	if ex.Position != 1 || ex.Reason != ExceedsMaxQuota || len(ex.Shortfalls) != 2 || ex.Preemption.Possible {
		t.Fatalf("q: %+v", ex)
	}
	if ex.Shortfalls[0] != (Shortfall{Flavor: "h100", Resource: gpu, Requested: 16000, Available: 2000}) {
		t.Fatalf("q shortfall %+v", ex.Shortfalls[0])
	}

	ex, _ = e.Explain(key("p")) // 16 GPUs; h200 has 8 with "low" using 8... exceeds too
	if ex.Position != 0 || ex.FairShare.Cohort != "co" {
		t.Fatalf("p: %+v", ex)
	}
	if _, ok := e.Explain(key("low")); ok {
		t.Fatal("admitted workload explained as pending")
	}
	if _, ok := e.Explain(key("nope")); ok {
		t.Fatal("unknown workload explained")
	}
}

func TestExplainPreemptionPlan(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, strict))
	mustWL(t, e, running(job("low", "a", 0, 0, 1, 8), "a", 1), job("p", "a", 5, 1, 1, 4), job("behind", "a", 5, 2, 1, 1))
	cycle(t, e)
	ex, _ := e.Explain(key("p"))
	if ex.Reason != InsufficientQuota || ex.Preemption.Possible {
		t.Fatalf("policy Never: %+v", ex)
	}
	if !strings.Contains(ex.Message, "requested 4, available 0") {
		t.Fatalf("message %q", ex.Message)
	}
	ex, _ = e.Explain(key("behind"))
	if ex.Reason != BlockedByHead || ex.Position != 1 || !strings.Contains(ex.Message, "ns/p") {
		t.Fatalf("behind: %+v", ex)
	}
	if !slices.Equal(ex.Mentions, []WorkloadKey{key("p")}) {
		t.Fatalf("behind mentions %v, want the head it waits behind", ex.Mentions)
	}
	// Same state with a preemption policy: Explain shows the plan without acting on it.
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, strict, preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})))
	ex, _ = e.Explain(key("p"))
	if !ex.Preemption.Possible || len(ex.Preemption.Victims) != 1 || ex.Preemption.Victims[0].Victim != key("low") {
		t.Fatalf("plan %+v", ex.Preemption)
	}
	if !slices.Equal(ex.Mentions, []WorkloadKey{key("low")}) {
		t.Fatalf("p mentions %v, want its would-be victim", ex.Mentions)
	}
	if e.workloads[key("low")].evicting {
		t.Fatal("Explain marked a victim")
	}
	if err := checkInvariants(e); err != nil {
		t.Fatal(err)
	}
}
