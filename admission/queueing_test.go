package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestQueueOrder: priority desc, then creation time, then key.
func TestQueueOrder(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{3}))
	mustWL(t, e,
		job("late-low", "a", 0, 5, 1, 1),
		job("b-same", "a", 1, 3, 1, 1),
		job("a-same", "a", 1, 3, 1, 1),
		job("early-low", "a", 0, 1, 1, 1),
		job("high", "a", 9, 9, 1, 1),
	)
	if got, want := admittedNames(cycle(t, e)), []string{"high", "a-same", "b-same"}; !eqStrings(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}

// TestQueueingStrategies: a head that does not fit blocks StrictFIFO, not BestEffortFIFO.
func TestQueueingStrategies(t *testing.T) {
	tests := []struct {
		strategy    QueueingStrategy
		wantAdmit   []string
		smallReason PendingReason
	}{
		{strategy: StrictFIFO, wantAdmit: nil, smallReason: BlockedByHead},
		{strategy: BestEffortFIFO, wantAdmit: []string{"small"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.strategy), func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, func(c *ClusterQueue) { c.QueueingStrategy = tc.strategy }))
			running := job("running", "a", 0, 0, 1, 4)
			adm := Admission{ClusterQueue: "a", PodSets: []PodSetAssignment{{Name: "main", Count: 1, Flavors: map[ResourceName]string{gpu: "h200"}}}}
			running.Admission = &adm
			mustWL(t, e, running, job("big", "a", 5, 1, 1, 8), job("small", "a", 0, 2, 1, 2))
			res := cycle(t, e)
			if got := admittedNames(res); !eqStrings(got, tc.wantAdmit) {
				t.Fatalf("admitted %v, want %v", got, tc.wantAdmit)
			}
			if p, _ := pendingReason(res, "big"); p.Reason != InsufficientQuota {
				t.Fatalf("head reason %q", p.Reason)
			}
			if p, _ := pendingReason(res, "small"); p.Reason != tc.smallReason {
				t.Fatalf("small reason %q, want %q", p.Reason, tc.smallReason)
			}
		})
	}
}

// TestStrictFIFONextHeadEvaluated: once a StrictFIFO head is admitted, the workloads
// behind it are evaluated in the same cycle.
func TestStrictFIFONextHeadEvaluated(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, strict))
	mustWL(t, e, job("j1", "a", 0, 1, 1, 6), job("j2", "a", 0, 2, 1, 4), job("j3", "a", 0, 3, 1, 1))
	res := cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"j1"}) {
		t.Fatalf("admitted %v", got)
	}
	e.DeleteWorkload(key("j1"))
	if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"j2", "j3"}) {
		t.Fatalf("admitted %v after j1 finished", got)
	}
}

// TestManyAdmissionsPerCycle: one cycle admits everything that fits, across queues.
func TestManyAdmissionsPerCycle(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	var want int
	for q := range 10 {
		mustCQ(t, e, newCQ(fmt.Sprintf("q%d", q), "co", []string{"h200"}, []int64{16}))
		for j := range 20 {
			mustWL(t, e, job(fmt.Sprintf("q%d-j%d", q, j), fmt.Sprintf("q%d", q), 0, int64(j), 1, 1))
		}
		want += 16
	}
	if got := len(cycle(t, e).Admitted); got != want {
		t.Fatalf("admitted %d in one cycle, want %d", got, want)
	}
}

// TestAntiStarvation: BestEffortFIFO head of 8 GPUs behind a stream of 2-GPU jobs.
// Without the reservation rule the small jobs would take every freed GPU forever.
func TestAntiStarvation(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		starve bool
	}{
		{name: "skip count", opts: Options{StarvationSkips: 2}},
		{name: "age", opts: Options{StarvationSkips: 1000, StarvationAge: 3 * time.Minute}},
		{name: "rule out of reach: starves (control)", opts: Options{StarvationSkips: 1000}, starve: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.opts)
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}))
			specs := map[string]Workload{}
			var running []string
			for i := range 3 {
				w := job(fmt.Sprintf("s%d", i), "a", 0, int64(i), 1, 2)
				specs[w.Key.Name] = w
				mustWL(t, e, w)
				running = append(running, w.Key.Name)
			}
			mustWL(t, e, job("big", "a", 0, 10, 1, 8))
			now := t0
			for round := range 20 {
				w := job(fmt.Sprintf("n%d", round), "a", 0, int64(100+round), 1, 2)
				specs[w.Key.Name] = w
				mustWL(t, e, w)
				res := e.Cycle(now)
				now = now.Add(time.Minute)
				for _, a := range res.Admitted {
					if a.Key.Name == "big" {
						if tc.starve {
							t.Fatal("control case admitted big")
						}
						return
					}
					running = append(running, a.Key.Name)
				}
				confirm(t, e, specs, res)
				e.DeleteWorkload(key(running[0])) // the oldest small job finishes
				running = running[1:]
			}
			if !tc.starve {
				t.Fatal("big head starved for 20 rounds")
			}
		})
	}
}

// TestReservationOnlyBlocksSharedResources: a reserving head does not block work
// that needs none of its resources.
func TestReservationOnlyBlocksSharedResources(t *testing.T) {
	e := newEngine(t, Options{StarvationSkips: 1})
	cq := newCQ("a", "", []string{"h200"}, []int64{8})
	cq.ResourceGroups = append(cq.ResourceGroups, ResourceGroup{CoveredResources: []ResourceName{cpu},
		Flavors: []FlavorQuotas{{Flavor: "cpu", Resources: map[ResourceName]Quota{cpu: {Nominal: 100000}}}}})
	mustCQ(t, e, cq)
	mustWL(t, e, job("s0", "a", 0, 0, 1, 6), job("big", "a", 0, 1, 1, 8), job("s1", "a", 0, 2, 1, 1))
	if got := admittedNames(cycle(t, e)); !eqStrings(got, []string{"s0", "s1"}) {
		t.Fatalf("admitted %v", got)
	}
	cpuJob := Workload{Key: key("cpu-only"), ClusterQueue: "a", CreationTime: 3, PodSets: []PodSet{{Name: "p", Count: 1, Requests: Resources{cpu: 1000}}}}
	mustWL(t, e, job("s2", "a", 0, 3, 1, 1), cpuJob)
	res := cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"cpu-only"}) {
		t.Fatalf("admitted %v, want only cpu-only", got)
	}
	if p, _ := pendingReason(res, "s2"); p.Reason != ReservedForHead {
		t.Fatalf("s2 reason %q, want ReservedForHead", p.Reason)
	}
}

// TestPendingUpdatesOncePerChange: a pending status is reported when it changes only,
// and messages never carry the queue position.
func TestPendingUpdatesOncePerChange(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, strict))
	mustWL(t, e, job("j1", "a", 0, 1, 1, 8), job("j2", "a", 0, 2, 1, 8), job("j3", "a", 0, 3, 1, 8))
	res := cycle(t, e)
	if len(res.Pending) != 2 {
		t.Fatalf("first cycle pending updates %v, want j2 and j3", res.Pending)
	}
	for range 3 {
		if res := cycle(t, e); len(res.Pending) != 0 || len(res.Admitted) != 0 {
			t.Fatalf("unchanged cycle reported %s", fmtResult(res))
		}
	}
	e.DeleteWorkload(key("j1"))
	res = cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"j2"}) {
		t.Fatalf("admitted %v", got)
	}
	// j3's situation changed (blocked by j2 → insufficient quota): one update.
	p, ok := pendingReason(res, "j3")
	if !ok || p.Reason != InsufficientQuota {
		t.Fatalf("j3 update %+v", res.Pending)
	}
	want := "insufficient quota for nvidia.com/gpu in flavor h200: requested 8, available 0 (nominal 0, borrowable 0)"
	if p.Message != want {
		t.Fatalf("message %q\nwant    %q", p.Message, want)
	}
	for _, u := range res.Pending {
		if strings.Contains(strings.ToLower(u.Message), "position") {
			t.Fatalf("message mentions position: %q", u.Message)
		}
	}
}

// TestHeldReasons covers reasons that need a queue or quota change.
func TestHeldReasons(t *testing.T) {
	tests := []struct {
		name    string
		cq      ClusterQueue
		w       Workload
		reason  PendingReason
		message string
	}{
		{
			name:    "unsupported resource",
			cq:      newCQ("a", "", []string{"h200"}, []int64{8}),
			w:       Workload{Key: key("w"), ClusterQueue: "a", PodSets: []PodSet{{Name: "p", Count: 1, Requests: Resources{"example.com/fpga": 1000}}}},
			reason:  UnsupportedResource,
			message: `resource example.com/fpga is not covered by any resource group of ClusterQueue "a"`,
		},
		{
			name:    "exceeds max quota",
			cq:      newCQ("a", "co", []string{"h200"}, []int64{8}, borrowLimit(4)),
			w:       job("w", "a", 0, 1, 2, 8),
			reason:  ExceedsMaxQuota,
			message: `requested 16 of nvidia.com/gpu exceeds what ClusterQueue "a" can ever get in flavor h200 (8)`,
		},
		{
			name:    "zero requests admit at once",
			cq:      newCQ("a", "", []string{"h200"}, []int64{1}),
			w:       job("w", "a", 0, 1, 3, 0),
			reason:  "",
			message: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, tc.cq)
			mustWL(t, e, tc.w)
			res := cycle(t, e)
			p, _ := pendingReason(res, "w")
			if p.Reason != tc.reason || p.Message != tc.message {
				t.Fatalf("got %q %q, want %q %q", p.Reason, p.Message, tc.reason, tc.message)
			}
		})
	}
}

// TestNothingFitsCycleExaminesNothing: a cycle without changes evaluates nothing.
func TestNothingFitsCycleExaminesNothing(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	for q := range 5 {
		mustCQ(t, e, newCQ(fmt.Sprintf("q%d", q), "co", []string{"h200"}, []int64{1}))
		for j := range 10 {
			mustWL(t, e, job(fmt.Sprintf("q%d-%d", q, j), fmt.Sprintf("q%d", q), 0, int64(j), 1, 2))
		}
	}
	cycle(t, e)
	before := e.clock.cycle
	cycle(t, e)
	for _, w := range e.workloads {
		if w.evalCycle > before {
			t.Fatalf("%s evaluated in an unchanged cycle", w.key)
		}
	}
}

func TestFmtAmount(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 1000: "1", 16000: "16", 1500: "1500m", 1: "1m"} {
		if got := fmtAmount(in); got != want {
			t.Errorf("fmtAmount(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestReleaseWakesOnlyWhatMightFit: after a release, a BestEffortFIFO queue
// re-evaluates only parked workloads whose request is within what is now available.
func TestReleaseWakesOnlyWhatMightFit(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}))
	mustWL(t, e, job("run", "a", 9, 0, 1, 2), job("run2", "a", 9, 0, 1, 6))
	for i := range 50 {
		mustWL(t, e, job(fmt.Sprintf("big%d", i), "a", 0, int64(i+1), 1, 4))
	}
	mustWL(t, e, job("small", "a", 0, 100, 1, 2))
	cycle(t, e)
	before := e.clock.cycle
	e.DeleteWorkload(key("run")) // frees 2 GPUs
	res := cycle(t, e)
	if got := admittedNames(res); !eqStrings(got, []string{"small"}) {
		t.Fatalf("admitted %v", got)
	}
	for _, w := range e.workloads {
		if w.evalCycle > before && w.key.Name != "small" {
			t.Fatalf("%s re-evaluated although it cannot fit in 2 GPUs", w.key)
		}
	}
}

func TestBucketKey(t *testing.T) {
	tests := []struct{ in, want int64 }{
		{1, 1}, {8, 8}, {9, 10}, {1000, 1024}, {1024, 1024}, {1025, 1280}, {2000, 2048}, {3000, 3072}, {16000, 16384},
	}
	for _, tc := range tests {
		if got := bucketKey(tc.in); got != tc.want {
			t.Errorf("bucketKey(%d) = %d, want %d", tc.in, got, tc.want)
		}
		if got := bucketKey(tc.in); got < tc.in {
			t.Errorf("bucketKey(%d) = %d is below its input", tc.in, got)
		}
	}
}
