package admission

import (
	"strings"
	"testing"
)

func admitted(w Workload, cq string) Workload {
	const flavor = "h200"
	a := Admission{ClusterQueue: cq}
	for _, ps := range w.PodSets {
		f := map[ResourceName]string{}
		for r := range ps.Requests {
			f[r] = flavor
		}
		a.PodSets = append(a.PodSets, PodSetAssignment{Name: ps.Name, Count: ps.Count, Flavors: f})
	}
	w.Admission = &a
	return w
}

// TestWorkloadLifecycle drives admission, confirmation, stale events, rollback,
// eviction and deletion and checks the queue's usage after each step.
func TestWorkloadLifecycle(t *testing.T) {
	j1, j2 := job("j1", "a", 0, 1, 1, 6), job("j2", "a", 0, 2, 1, 4)
	type step struct {
		name      string
		do        func(t *testing.T, e *Engine)
		wantAdmit []string // from a cycle run after do
		wantUsage int64    // GPUs used by "a" after that cycle
	}
	steps := []step{
		{name: "first cycle admits j1", do: func(*testing.T, *Engine) {}, wantAdmit: []string{"j1"}, wantUsage: 6},
		{name: "stale pending event of assumed j1 is ignored", do: func(t *testing.T, e *Engine) { mustWL(t, e, j1) }, wantUsage: 6},
		{name: "rollback returns j1; re-admitted", do: func(t *testing.T, e *Engine) { e.Rollback(key("j1")) }, wantAdmit: []string{"j1"}, wantUsage: 6},
		{name: "confirm j1", do: func(t *testing.T, e *Engine) { mustWL(t, e, admitted(j1, "a")) }, wantUsage: 6},
		{name: "confirm again is idempotent", do: func(t *testing.T, e *Engine) { mustWL(t, e, admitted(j1, "a")) }, wantUsage: 6},
		{name: "rollback of a confirmed admission is a no-op", do: func(t *testing.T, e *Engine) { e.Rollback(key("j1")) }, wantUsage: 6},
		{name: "eviction releases j1; first in order, it is admitted again", do: func(t *testing.T, e *Engine) { mustWL(t, e, j1) }, wantAdmit: []string{"j1"}, wantUsage: 6},
		{name: "confirm j1 again", do: func(t *testing.T, e *Engine) { mustWL(t, e, admitted(j1, "a")) }, wantUsage: 6},
		{name: "delete j1 admits j2", do: func(t *testing.T, e *Engine) { e.DeleteWorkload(key("j1")) }, wantAdmit: []string{"j2"}, wantUsage: 4},
		{name: "delete is idempotent", do: func(t *testing.T, e *Engine) { e.DeleteWorkload(key("j1")); e.DeleteWorkload(key("j1")) }, wantUsage: 4},
		{name: "delete the assumed j2 frees all", do: func(t *testing.T, e *Engine) { e.DeleteWorkload(key("j2")) }, wantUsage: 0},
	}
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}))
	mustWL(t, e, j1, j2)
	for _, s := range steps {
		s.do(t, e)
		res := cycle(t, e)
		if got := admittedNames(res); !eqStrings(got, s.wantAdmit) {
			t.Fatalf("%s: admitted %v, want %v", s.name, got, s.wantAdmit)
		}
		if got := e.queues.cqs["a"].usage[makeFR(e.names.flavorIDs["h200"], e.names.resIDs[gpu])]; got != s.wantUsage*1000 {
			t.Fatalf("%s: usage %d, want %d", s.name, got, s.wantUsage*1000)
		}
	}
}

// TestRollbackRestoresPendingStatus: a rolled-back workload keeps its last reported
// status, so the next report happens only on a real change.
func TestRollbackRestoresPendingStatus(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{4}))
	mustWL(t, e, job("j1", "a", 0, 1, 1, 4), job("j2", "a", 0, 2, 1, 4))
	res := cycle(t, e)
	if p, _ := pendingReason(res, "j2"); p.Reason != InsufficientQuota {
		t.Fatalf("j2: %s", fmtResult(res))
	}
	e.DeleteWorkload(key("j1"))
	if res = cycle(t, e); len(res.Admitted) != 1 {
		t.Fatalf("j2 not admitted: %s", fmtResult(res))
	}
	e.Rollback(key("j2"))
	if ex, ok := e.Explain(key("j2")); !ok || ex.Position != 0 {
		t.Fatalf("after rollback: %+v %v", ex, ok)
	}
	mustWL(t, e, job("j0", "a", 5, 0, 1, 4)) // takes the quota first
	res = cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"j0"}) {
		t.Fatalf("admitted %v", got)
	}
	if _, ok := pendingReason(res, "j2"); ok {
		t.Fatalf("j2 re-reported an unchanged status: %s", fmtResult(res))
	}
}

// TestRestartRebuild: after a restart the engine is rebuilt from objects; admitted
// workloads count as usage and are never admitted again.
func TestRestartRebuild(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "co", []string{"h200"}, []int64{8}), newCQ("b", "co", []string{"h200"}, []int64{0}))
	// Objects arrive in any order: workloads before their queue is known.
	mustWL(t, e, admitted(job("run1", "b", 0, 1, 1, 6), "b"), job("p1", "a", 0, 2, 1, 4),
		admitted(job("run2", "a", 0, 0, 1, 1), "a"))
	res := cycle(t, e)
	if len(res.Admitted) != 0 {
		t.Fatalf("admitted %v, want nothing (7 of 8 in use)", admittedNames(res))
	}
	if ex, _ := e.Explain(key("p1")); ex.Reason != InsufficientQuota || len(ex.Shortfalls) != 1 || ex.Shortfalls[0].Available != 1000 {
		t.Fatalf("explain: %+v", ex)
	}
}

func TestUpsertWorkloadValidation(t *testing.T) {
	base := func() Workload { return job("w", "a", 0, 1, 2, 1) }
	tests := []struct {
		name    string
		mutate  func(*Workload)
		wantErr string
	}{
		{name: "empty name", mutate: func(w *Workload) { w.Key.Name = "" }, wantErr: "key.name"},
		{name: "no queue", mutate: func(w *Workload) { w.ClusterQueue = "" }, wantErr: "clusterQueue"},
		{name: "no pod sets", mutate: func(w *Workload) { w.PodSets = nil }, wantErr: "pod set"},
		{name: "zero count", mutate: func(w *Workload) { w.PodSets[0].Count = 0 }, wantErr: "count"},
		{name: "negative request", mutate: func(w *Workload) { w.PodSets[0].Requests[gpu] = -1 }, wantErr: "request"},
		{name: "overflowing request", mutate: func(w *Workload) { w.PodSets[0].Requests[gpu] = MaxAmount }, wantErr: "request"},
		{name: "duplicate pod set", mutate: func(w *Workload) { w.PodSets = append(w.PodSets, w.PodSets[0]) }, wantErr: "duplicate"},
		{name: "admission without flavor", mutate: func(w *Workload) {
			w.Admission = &Admission{ClusterQueue: "a", PodSets: []PodSetAssignment{{Name: "main", Count: 2}}}
		}, wantErr: "no flavor"},
		{name: "admission pod set mismatch", mutate: func(w *Workload) {
			w.Admission = &Admission{ClusterQueue: "a"}
		}, wantErr: "pod sets"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}))
			orig := base()
			mustWL(t, e, orig)
			w := base()
			tc.mutate(&w)
			err := e.UpsertWorkload(w)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want mention of %q", err, tc.wantErr)
			}
			if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"w"}) {
				t.Fatalf("original workload not intact: admitted %v", got)
			}
		})
	}
}

// TestUpsertUnchangedPendingIsNoop: re-upserting an unchanged pending workload does
// not make it fresh (no re-evaluation, no status report).
func TestUpsertUnchangedPendingIsNoop(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{1}))
	w := job("w", "a", 0, 1, 1, 2)
	mustWL(t, e, w)
	cycle(t, e)
	mustWL(t, e, w)
	if e.queues.cqs["a"].fresh.len() != 0 || e.queues.cqs["a"].refresh != refreshNone {
		t.Fatal("unchanged upsert made the workload fresh")
	}
	w.Priority = 3
	mustWL(t, e, w)
	if !e.queues.cqs["a"].fresh.has(e.workloads[key("w")]) {
		t.Fatal("changed upsert did not make the workload fresh")
	}
}

// TestMoveBetweenQueues: a pending workload whose LocalQueue is re-pointed moves.
func TestMoveBetweenQueues(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{1}), newCQ("b", "", []string{"h200"}, []int64{8}))
	w := job("w", "a", 0, 1, 1, 2)
	mustWL(t, e, w)
	cycle(t, e)
	w.ClusterQueue = "b"
	mustWL(t, e, w)
	res := cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"w"}) || res.Admitted[0].Admission.ClusterQueue != "b" {
		t.Fatalf("got %s", fmtResult(res))
	}
}
