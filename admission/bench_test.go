package admission

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// benchWorld is the benchmark scenario: 1,000 ClusterQueues in 10 cohorts, each with
// two GPU flavors of 4 GPUs nominal (8,000 GPUs in all), and N pending gangs of 1-64
// GPUs (1, 2, 4 or 8 pods × 1, 2, 4 or 8 GPUs) with priorities 0-3, spread evenly.
// Demand far exceeds capacity, so about N workloads stay pending in steady state.
type benchWorld struct {
	e        *Engine
	rng      *rand.Rand
	specs    map[WorkloadKey]Workload
	admitted []WorkloadKey // in admission order (oldest first)
	next     int
	clock    int64
}

const (
	benchQueues  = 1000
	benchCohorts = 10
)

func newBenchWorld(tb testing.TB, opts Options, n int, strategy QueueingStrategy) *benchWorld {
	w := &benchWorld{e: newEngine(tb, opts), rng: rand.New(rand.NewPCG(1, 2)), specs: map[WorkloadKey]Workload{}}
	for q := range benchQueues {
		cq := newCQ(fmt.Sprintf("q%04d", q), fmt.Sprintf("c%d", q%benchCohorts), []string{"h100", "h200"}, []int64{4, 4})
		cq.QueueingStrategy = strategy
		mustCQ(tb, w.e, cq)
	}
	for range n {
		w.add(tb)
	}
	return w
}

func (w *benchWorld) add(tb testing.TB) {
	sizes := []int64{1, 2, 4, 8}
	w.clock++
	wl := Workload{
		Key:          WorkloadKey{Namespace: "bench", Name: fmt.Sprintf("w%d", w.next)},
		ClusterQueue: fmt.Sprintf("q%04d", w.rng.IntN(benchQueues)),
		Priority:     int32(w.rng.IntN(4)),
		CreationTime: w.clock,
		PodSets:      []PodSet{{Name: "workers", Count: int32(sizes[w.rng.IntN(4)]), Requests: Resources{gpu: sizes[w.rng.IntN(4)] * 1000}}},
	}
	w.next++
	w.specs[wl.Key] = wl
	if err := w.e.UpsertWorkload(wl); err != nil {
		tb.Fatal(err)
	}
}

// apply confirms every admission of res, as the controller does.
func (w *benchWorld) apply(tb testing.TB, res Result) {
	for _, a := range res.Admitted {
		wl := w.specs[a.Key]
		adm := a.Admission
		wl.Admission = &adm
		if err := w.e.UpsertWorkload(wl); err != nil {
			tb.Fatal(err)
		}
		w.admitted = append(w.admitted, a.Key)
	}
}

// churn finishes the k oldest admitted workloads and adds k new pending ones.
func (w *benchWorld) churn(tb testing.TB, k int) {
	k = min(k, len(w.admitted))
	for _, key := range w.admitted[:k] {
		w.e.DeleteWorkload(key)
		delete(w.specs, key)
	}
	w.admitted = w.admitted[k:]
	for range k {
		w.add(tb)
	}
}

var benchSizes = []int{1_000, 10_000, 100_000, 1_000_000}

// BenchmarkAdmission measures the cost of one admission decision in steady state:
// each round finishes the `churn` oldest running workloads, adds as many new pending
// ones, and runs a cycle; only the cycle is timed (ns/op and ns/admission, per
// admission); with-inputs-ns/admission adds the engine calls that fed it. Every
// finish wakes its whole cohort (100 queues), so a round with churn 64 wakes all
// 1,000 queues for about 60 admissions, and once the first few served have taken
// what was freed the cycle passes over the rest (cohortwake.go); churn 512 is a
// controller batching a busier period into one cycle.
func BenchmarkAdmission(b *testing.B) {
	for _, strategy := range []QueueingStrategy{BestEffortFIFO, StrictFIFO} {
		for _, churn := range []int{64, 512} {
			for _, n := range benchSizes {
				benchAdmission(b, strategy, churn, n)
			}
		}
	}
}

// BenchmarkWakeRule runs BenchmarkAdmission's steady state at churn 64 under
// both wake rules, interleaved, for a comparison on one machine in one run:
// "pass-over" (the engine's: a release wakes the cohort and a cycle takes
// only the members it could help, wakeorder.go) and "whole-cohort" (every
// member a release woke is served and re-keyed, every queue with pending
// work taken, Options.wakeWholeCohort).
func BenchmarkWakeRule(b *testing.B) {
	for _, strategy := range []QueueingStrategy{BestEffortFIFO, StrictFIFO} {
		for _, n := range []int{1_000, 100_000} {
			for _, rule := range []string{"pass-over", "whole-cohort"} {
				opts := DefaultOptions()
				opts.wakeWholeCohort = rule == "whole-cohort"
				benchSteady(b, fmt.Sprintf("%s/N=%d/%s", strategy, n, rule), opts, strategy, 64, n)
			}
		}
	}
}

func benchAdmission(b *testing.B, strategy QueueingStrategy, churn, n int) {
	benchSteady(b, fmt.Sprintf("%s/churn=%d/N=%d", strategy, churn, n), DefaultOptions(), strategy, churn, n)
}

// benchSteady is one steady-state run of BenchmarkAdmission, named name.
func benchSteady(b *testing.B, name string, opts Options, strategy QueueingStrategy, churn, n int) {
	b.Run(name, func(b *testing.B) {
		w := newBenchWorld(b, opts, n, strategy)
		w.apply(b, w.e.Cycle(t0)) // initial fill, untimed
		w.e.evaluations, w.e.passedOver = 0, 0
		b.ReportAllocs()
		b.ResetTimer()
		var admissions, cycles int
		var cycleTime, inputTime time.Duration
		for admissions < b.N {
			b.StopTimer()
			start := time.Now()
			w.churn(b, churn)
			inputTime += time.Since(start)
			b.StartTimer()
			start = time.Now()
			res := w.e.Cycle(t0)
			cycleTime += time.Since(start)
			b.StopTimer()
			if len(res.Admitted) == 0 {
				b.Fatalf("steady state admitted nothing (pending %d)", len(w.specs))
			}
			admissions += len(res.Admitted)
			cycles++
			start = time.Now()
			w.apply(b, res)
			inputTime += time.Since(start)
			b.StartTimer()
		}
		b.ReportMetric(float64(cycleTime.Nanoseconds())/float64(admissions), "ns/admission")
		// The inputs (finishing, queueing and confirming workloads: what
		// a release's wake costs, among others), beside the cycle; the
		// harness's own bookkeeping is inside it too, so it bounds the
		// engine's share from above.
		b.ReportMetric(float64((cycleTime+inputTime).Nanoseconds())/float64(admissions), "with-inputs-ns/admission")
		b.ReportMetric(float64(admissions)/float64(cycles), "admissions/cycle")
		b.ReportMetric(float64(w.e.evaluations)/float64(admissions), "evals/admission")
		b.ReportMetric(float64(w.e.passedOver)/float64(cycles), "passed-over/cycle")
	})
}

// BenchmarkNothingFits measures a cycle in which nothing fits, after the initial
// fill. "unchanged": no input since the last cycle. "all-woken": every queue is
// marked as if capacity had been released in its cohort (what a finished workload
// does to its cohort), but nothing was actually freed, so every queue's head and
// parked index is examined and nothing fits: the worst case of a fruitless cycle.
func BenchmarkNothingFits(b *testing.B) {
	for _, n := range benchSizes {
		for _, mode := range []string{"unchanged", "all-woken"} {
			b.Run(fmt.Sprintf("%s/N=%d", mode, n), func(b *testing.B) {
				w := newBenchWorld(b, DefaultOptions(), n, BestEffortFIFO)
				w.apply(b, w.e.Cycle(t0))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if mode == "all-woken" {
						b.StopTimer()
						for _, co := range w.e.queues.cohorts {
							w.e.fair.touchCohort(co, refreshCapacity)
						}
						b.StartTimer()
					}
					if res := w.e.Cycle(t0); len(res.Admitted) != 0 {
						b.Fatal("something fit")
					}
				}
			})
		}
	}
}

// TestMemoryPerPendingWorkload reports the engine's heap per pending workload.
// Skipped in -short mode; run with -v to see the figure.
func TestMemoryPerPendingWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100,000 workloads")
	}
	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := newBenchWorld(t, DefaultOptions(), n, BestEffortFIFO)
	w.apply(t, w.e.Cycle(t0)) // evaluated once: parked indexes populated
	pending := 0
	for _, x := range w.e.workloads {
		if x.phase == phasePending {
			pending++
		}
	}
	w.specs = nil // the harness's copy is not engine memory
	runtime.GC()
	runtime.ReadMemStats(&after)
	perWL := float64(after.HeapAlloc-before.HeapAlloc) / float64(len(w.e.workloads))
	t.Logf("engine heap: %.0f bytes per workload (%d workloads, %d pending)", perWL, len(w.e.workloads), pending)
	if perWL > 1024 {
		t.Errorf("engine heap %.0f B per workload, budget 1024", perWL)
	}
	runtime.KeepAlive(w.e)
}

// BenchmarkEngineHeap reports the engine's live heap per workload (runtime.MemStats,
// after GC) once N workloads are upserted and a first cycle has evaluated them all
// (parked indexes populated). One op builds one world; heap-B/workload is the figure.
func BenchmarkEngineHeap(b *testing.B) {
	for _, n := range benchSizes[1:] {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				w := newBenchWorld(b, DefaultOptions(), n, BestEffortFIFO)
				w.apply(b, w.e.Cycle(t0))
				w.specs, w.admitted = nil, nil
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(w.e.workloads)), "heap-B/workload")
				runtime.KeepAlive(w.e)
			}
		})
	}
}
