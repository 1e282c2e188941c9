package admission

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

const gpu ResourceName = "nvidia.com/gpu"
const cpu ResourceName = "cpu"

func ptr(v int64) *int64 { return &v }

// cqOpt modifies a ClusterQueue built by newCQ.
type cqOpt func(*ClusterQueue)

// newCQ builds a ClusterQueue with one resource group covering GPUs, with one flavor
// per (flavor, nominal GPUs) pair given, in order.
func newCQ(name, cohort string, flavors []string, nominal []int64, opts ...cqOpt) ClusterQueue {
	cq := ClusterQueue{Name: name, Cohort: cohort, FairShareWeight: 1000, QueueingStrategy: BestEffortFIFO}
	g := ResourceGroup{CoveredResources: []ResourceName{gpu}}
	for i, f := range flavors {
		g.Flavors = append(g.Flavors, FlavorQuotas{Flavor: f, Resources: map[ResourceName]Quota{gpu: {Nominal: nominal[i] * 1000}}})
	}
	cq.ResourceGroups = []ResourceGroup{g}
	for _, o := range opts {
		o(&cq)
	}
	return cq
}

func strict(cq *ClusterQueue) { cq.QueueingStrategy = StrictFIFO }

func borrowLimit(gpus int64) cqOpt {
	return func(cq *ClusterQueue) {
		for _, g := range cq.ResourceGroups {
			for _, f := range g.Flavors {
				q := f.Resources[gpu]
				q.BorrowingLimit = ptr(gpus * 1000)
				f.Resources[gpu] = q
			}
		}
	}
}

func lendLimit(gpus int64) cqOpt {
	return func(cq *ClusterQueue) {
		for _, g := range cq.ResourceGroups {
			for _, f := range g.Flavors {
				q := f.Resources[gpu]
				q.LendingLimit = ptr(gpus * 1000)
				f.Resources[gpu] = q
			}
		}
	}
}

func preempt(p PreemptionPolicy) cqOpt { return func(cq *ClusterQueue) { cq.Preemption = p } }
func weight(w int64) cqOpt             { return func(cq *ClusterQueue) { cq.FairShareWeight = w } }

// job builds a single-pod-set workload of pods × gpusPerPod GPUs.
func job(name, cq string, prio int32, created int64, pods int32, gpusPerPod int64) Workload {
	return Workload{
		Key: WorkloadKey{Namespace: "ns", Name: name}, ClusterQueue: cq, Priority: prio, CreationTime: created,
		PodSets: []PodSet{{Name: "main", Count: pods, Requests: Resources{gpu: gpusPerPod * 1000}}},
	}
}

func key(name string) WorkloadKey { return WorkloadKey{Namespace: "ns", Name: name} }

func newEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustCQ(t testing.TB, e *Engine, cqs ...ClusterQueue) {
	t.Helper()
	for _, cq := range cqs {
		if err := e.UpsertClusterQueue(cq); err != nil {
			t.Fatal(err)
		}
	}
}

func mustWL(t testing.TB, e *Engine, ws ...Workload) {
	t.Helper()
	for _, w := range ws {
		if err := e.UpsertWorkload(w); err != nil {
			t.Fatal(err)
		}
	}
}

var t0 = time.Unix(1_800_000_000, 0)

// cycle runs a cycle, checks the engine's invariants and returns the result.
func cycle(t testing.TB, e *Engine) Result {
	t.Helper()
	res := e.Cycle(t0)
	if err := checkInvariants(e); err != nil {
		t.Fatalf("invariants after cycle: %v", err)
	}
	return res
}

func admittedNames(r Result) []string {
	var out []string
	for _, a := range r.Admitted {
		out = append(out, a.Key.Name)
	}
	return out
}

func victimNames(r Result) []string {
	var out []string
	for _, p := range r.Preemptions {
		out = append(out, p.Victim.Name)
	}
	return out
}

// confirm upserts every admission of r back into the engine, as the controller does
// once the status write succeeded and the informer delivers it.
func confirm(t testing.TB, e *Engine, specs map[string]Workload, r Result) {
	t.Helper()
	for _, a := range r.Admitted {
		w := specs[a.Key.Name]
		adm := a.Admission
		w.Admission = &adm
		w.Booking = reservedRecord(w.Booking, adm)
		specs[a.Key.Name] = w
		mustWL(t, e, w)
	}
}

// reservedRecord is the booking record the controller writes for an admission:
// a new attempt, pending, with the failures and failed domains of the last one;
// prev unchanged for an admission that books nothing.
func reservedRecord(prev *Booking, a Admission) *Booking {
	p := a.Provisioning
	if p == nil {
		return nil
	}
	b := &Booking{Attempt: p.Attempt, State: BookingPending, Flavor: p.Flavor}
	if a.Topology != nil {
		d := cloneAssignment(*a.Topology)
		b.Domain = &d
	}
	if prev != nil && !prev.GaveUp {
		b.Failures, b.FailedDomains = prev.Failures, prev.FailedDomains
	}
	return b
}

// evict re-upserts the victims of r without admission, as the controller does once
// the eviction was written.
func evict(t testing.TB, e *Engine, specs map[string]Workload, r Result) {
	t.Helper()
	for _, p := range r.Preemptions {
		w := specs[p.Victim.Name]
		w.Admission = nil
		mustWL(t, e, w)
	}
}

func specMap(ws ...Workload) map[string]Workload {
	m := map[string]Workload{}
	for _, w := range ws {
		m[w.Key.Name] = w
	}
	return m
}

func pendingReason(r Result, name string) (PendingUpdate, bool) {
	i := slices.IndexFunc(r.Pending, func(p PendingUpdate) bool { return p.Key.Name == name })
	if i < 0 {
		return PendingUpdate{}, false
	}
	return r.Pending[i], true
}

func eqStrings(a, b []string) bool { return slices.Equal(a, b) }

func fmtResult(r Result) string {
	return fmt.Sprintf("admitted=%v victims=%v pending=%v", admittedNames(r), victimNames(r), r.Pending)
}
