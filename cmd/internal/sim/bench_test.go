package sim

import (
	"os"
	"testing"
	"time"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// benchInputs reads the benchmark's cluster (500 nodes) and generates its
// trace, cut to the first days.
func benchInputs(b testing.TB, days int) (Scenario, trace.Trace) {
	b.Helper()
	f, err := os.Open("testdata/bench/scenario.yaml")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc, err := ReadScenario(f, "bench/scenario.yaml")
	if err != nil {
		b.Fatal(err)
	}
	mf, err := os.Open("testdata/bench/mix.yaml")
	if err != nil {
		b.Fatal(err)
	}
	defer mf.Close()
	mix, err := trace.ReadMix(mf)
	if err != nil {
		b.Fatal(err)
	}
	mix.Duration = trace.Duration{Duration: time.Duration(days) * 24 * time.Hour}
	tr, err := trace.Generate(mix, 1)
	if err != nil {
		b.Fatal(err)
	}
	return sc, tr
}

// BenchmarkSimulate is the simulator's speed target: 30 days, about
// 100,000 jobs, on 500 nodes, per policy and all three together
// (docs/performance.md).
func BenchmarkSimulate(b *testing.B) {
	days := 30
	if testing.Short() {
		days = 3
	}
	sc, tr := benchInputs(b, days)
	for _, p := range append(Policies(), "all") {
		policies := []string{p}
		if p == "all" {
			policies = Policies() // side by side, one run per core
		}
		b.Run(p, func(b *testing.B) {
			b.ReportMetric(float64(len(tr.Jobs)), "jobs")
			for b.Loop() {
				if _, err := Simulate(sc, tr, Options{Policies: policies, Seed: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
