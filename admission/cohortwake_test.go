package admission

import (
	"math/rand/v2"
	"testing"
)

func TestBucketFloorBoundsItsBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	amounts := []int64{1, 2, 7, 8, 9, 10, 15, 16, 17, 999, 1000, 1001, 1024, 1025, 4096, 1 << 40}
	for range 10_000 {
		amounts = append(amounts, 1+rng.Int64N(1<<50))
	}
	for _, a := range amounts {
		k := bucketKey(a)
		if f := bucketFloor(k); f > a || f < 1 {
			t.Fatalf("bucketFloor(bucketKey(%d) = %d) = %d: not a positive lower bound", a, k, f)
		}
	}
	// Tight for the sizes GPU requests have.
	for _, tc := range []struct{ key, floor int64 }{{8, 8}, {10, 9}, {1024, 897}, {1280, 1025}} {
		if got := bucketFloor(tc.key); got != tc.floor {
			t.Errorf("bucketFloor(%d) = %d, want %d", tc.key, got, tc.floor)
		}
	}
}

// TestReleaseThatCannotHelpIsPassedOver: members of a cohort whose parked
// gangs are larger than anything a release freed are passed over, not
// served; once enough is free the first in order is admitted, and the
// decisions are the ones the old rule (every member served) makes.
func TestReleaseThatCannotHelpIsPassedOver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy func(*ClusterQueue)
	}{
		{"BestEffortFIFO", func(*ClusterQueue) {}},
		{"StrictFIFO", strict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newWorld := func(opts Options) (*Engine, map[string]Workload) {
				e := newEngine(t, opts)
				specs := map[string]Workload{}
				for _, q := range []string{"a", "b", "c"} {
					mustCQ(t, e, newCQ(q, "co", []string{"h100"}, []int64{4}, tc.strategy))
				}
				// a runs 4 × 1 GPU and c runs 4 × 2 GPUs on the 12 GPUs;
				// b and c park 4-GPU gangs.
				for i, w := range []Workload{job("a1", "a", 0, 1, 1, 1), job("a2", "a", 0, 2, 1, 1), job("a3", "a", 0, 3, 1, 1),
					job("a4", "a", 0, 4, 1, 1), job("c1", "c", 0, 5, 2, 2), job("c2", "c", 0, 6, 2, 2)} {
					specs[w.Key.Name] = w
					mustWL(t, e, w)
					if i == 5 {
						confirm(t, e, specs, cycle(t, e))
					}
				}
				for _, w := range []Workload{job("b1", "b", 0, 7, 2, 2), job("c3", "c", 0, 8, 1, 4)} {
					specs[w.Key.Name] = w
					mustWL(t, e, w)
				}
				if got := admittedNames(cycle(t, e)); len(got) != 0 {
					t.Fatalf("admitted %v with the cohort full", got)
				}
				return e, specs
			}
			e, specs := newWorld(DefaultOptions())
			old, oldSpecs := newWorld(wholeCohort(DefaultOptions()))
			// One GPU freed: nothing parked fits; b and c are passed
			// over (a queues nothing, so no cycle looks at it).
			e.DeleteWorkload(key("a1"))
			old.DeleteWorkload(key("a1"))
			before := e.passedOver
			if got, want := admittedNames(cycle(t, e)), admittedNames(cycle(t, old)); len(got) != 0 || len(want) != 0 {
				t.Fatalf("admitted %v (old rule %v) with one GPU free", got, want)
			}
			if n := e.passedOver - before; n != 2 {
				t.Errorf("passed over %d members, want b and c", n)
			}
			// Four GPUs free: b's gang (first in order) is admitted, as
			// under the old rule.
			for _, n := range []string{"a2", "a3", "a4"} {
				e.DeleteWorkload(key(n))
				old.DeleteWorkload(key(n))
			}
			got, want := cycle(t, e), cycle(t, old)
			if g, w := admittedNames(got), admittedNames(want); len(g) != 1 || len(w) != 1 || g[0] != w[0] {
				t.Fatalf("admitted %v, old rule %v: want the same one gang", g, w)
			}
			confirm(t, e, specs, got)
			confirm(t, old, oldSpecs, want)
		})
	}
}
