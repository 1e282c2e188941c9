package admission

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

// The facts the caller feeds besides specs — a workload deactivated, its
// LocalQueue missing, stopped or drained, its namespace refused, its
// ClusterQueue drained, its job changed, its pods counted at the deadline —
// are fuzzed by FuzzFacts, a target of its own so that the inputs of
// FuzzEngine and FuzzConvergence, and their recorded decisions, keep their
// meaning.

// FuzzFacts interleaves the operations of FuzzEngine with ones that change
// the facts, and checks after every cycle that a workload that cannot be
// queued is never admitted, that evictions name only admitted workloads and
// are decided once, and that a deactivated admitted workload is evicted.
func FuzzFacts(f *testing.F) {
	f.Add([]byte("\x01\x03\x00\x01\x02\x00\x05\x04\x00\x01\x00\x00\x00\x00\x00\x04\x04\x04"))
	f.Add([]byte("\x02\x02\x0d\x0e\x0f\x10\x11\x04\x05\x06\x07\x00\x01\x02\x0d\x04\x11\x04"))
	f.Fuzz(func(t *testing.T, data []byte) { runFacts(fuzzSetup(t, data)) })
}

// runFacts is one FuzzFacts input: 300 random operations, then a cycle.
func runFacts(r *fuzzRun) {
	for range 300 {
		if r.s.n(3) == 0 {
			r.factStep()
		} else {
			r.step()
		}
		r.checkModel()
	}
	r.cycle()
	r.checkModel()
}

// factStep changes one fact.
func (r *fuzzRun) factStep() {
	s := r.s
	switch s.n(6) {
	case 0, 1:
		name := r.pick()
		if name == "" || r.m.phase[name] == phaseAssumed {
			return // an assumed admission's upserts are stale events
		}
		w := r.m.specs[name]
		switch s.n(4) {
		case 0:
			w.Inactive = !w.Inactive
		case 1:
			w.LocalQueueState = []LocalQueueState{LocalQueueOpen, LocalQueueMissing, LocalQueueHold, LocalQueueHoldAndDrain}[s.n(4)]
		case 2:
			w.NamespaceRefusal = []NamespaceRefusal{NamespaceSelected, NamespaceNoSelector, NamespaceNotSelected}[s.n(3)]
		default:
			w.Inactive, w.LocalQueueState, w.NamespaceRefusal = false, LocalQueueOpen, NamespaceSelected
		}
		r.m.specs[name] = w
		r.upsert(r.object(name))
	case 2:
		cq := fuzzCQ(s, fmt.Sprintf("q%d", s.n(5)))
		cq.Stopped, cq.Drain = s.n(2) == 0, false
		if cq.Stopped {
			cq.Drain = s.n(2) == 0
		}
		r.quotaMoved = true
		r.both(func(e *Engine) error { return e.UpsertClusterQueue(cq) })
	case 3:
		name := r.pick()
		c := Change{Kind: ChangeKind(1 + s.n(4)), Detail: "from the fuzzer"}
		r.both(func(e *Engine) error { e.ReportChange(key(name), c); return nil })
	case 4:
		r.countPods()
	default:
		r.cycle()
	}
}

// countPods reports the Ready pods of a random started gang at its deadline,
// a minute after now, or at now.
func (r *fuzzRun) countPods() {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(r.m.adm)) {
		if bk := r.m.bk[name]; bk != nil && bk.State == BookingProvisioned {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	name := names[r.s.n(len(names))]
	rep := BookingReport{Attempt: r.m.bk[name].Attempt, Answer: AnswerPodsCounted, Ready: int32(r.s.n(8)),
		Deadline: r.now.Add(time.Duration(r.s.n(2)) * time.Minute).UnixNano(), ReadySeconds: 60}
	r.answer(name, rep)
}

// applyEvictions writes, rolls back or leaves pending each eviction, as the
// scheduler's writes succeed, fail or are under way.
func (r *fuzzRun) applyEvictions(res Result) {
	for _, ev := range res.Evictions {
		switch r.s.n(4) {
		case 0:
			r.both(func(e *Engine) error { e.Rollback(ev.Key); return nil })
		case 1: // not written yet
		default:
			r.evicted(ev.Key.Name) // the job stopped; the workload is queued again
		}
	}
}

// markedEvictions are the workloads whose eviction the engine decided and
// that are not evicted yet.
func markedEvictions(e *Engine) map[WorkloadKey]bool {
	out := map[WorkloadKey]bool{}
	for k, w := range e.workloads {
		if w.evictedAs != "" {
			out[k] = true
		}
	}
	return out
}

// checkEvictions: an eviction names an admitted workload, once, and never
// one already marked or chosen as a victim; an admitted workload that was
// deactivated is evicted unless another eviction of it is under way;
// workloads that cannot be queued are never admitted, and are reported with
// their reason.
func (r *fuzzRun) checkEvictions(res Result, marked map[WorkloadKey]bool) {
	seen := map[WorkloadKey]bool{}
	for _, p := range res.Preemptions {
		seen[p.Victim] = true
	}
	for _, ev := range res.Evictions {
		if r.m.phase[ev.Key.Name] != phaseAdmitted || seen[ev.Key] || marked[ev.Key] {
			r.t.Fatalf("eviction %+v of a workload in phase %d, already evicted or a victim", ev, r.m.phase[ev.Key.Name])
		}
		seen[ev.Key] = true
	}
	for name, ph := range r.m.phase {
		w := r.e.workloads[key(name)]
		if ph == phaseAdmitted && r.m.specs[name].Inactive && w != nil && w.phase == phaseAdmitted &&
			w.evictedAs == "" && !w.evicting && w.deciding == 0 {
			r.t.Fatalf("deactivated %s is admitted and not evicted", name)
		}
	}
	for _, a := range res.Admitted {
		spec := r.m.specs[a.Key.Name]
		if reason, _ := spec.Unqueueable(); reason != "" {
			r.t.Fatalf("%s admitted although it cannot be queued (%s)", a.Key, reason)
		}
	}
	for _, p := range res.Pending {
		if p.Reason.Unqueueable() {
			spec := r.m.specs[p.Key.Name]
			if want, _ := spec.Unqueueable(); want != p.Reason || r.m.phase[p.Key.Name] != phasePending {
				r.t.Fatalf("%s reported %s, its facts say %q in phase %d", p.Key, p.Reason, want, r.m.phase[p.Key.Name])
			}
		}
	}
}

// checkHeld checks that the engine holds exactly the pending workloads whose
// facts rule them out, and returns how many it holds.
func (r *fuzzRun) checkHeld() int {
	n := 0
	for name, ph := range r.m.phase {
		spec := r.m.specs[name]
		reason, _ := spec.Unqueueable()
		want := ph == phasePending && reason != ""
		got, held := r.e.Held(key(name))
		if held != want || (held && got != reason) {
			r.t.Fatalf("%s: held %v (%s), want %v (%s)", name, held, got, want, reason)
		}
		if held {
			n++
		}
	}
	if len(r.e.elig.held) != n {
		r.t.Fatalf("engine holds %d workloads, harness %d", len(r.e.elig.held), n)
	}
	return n
}
