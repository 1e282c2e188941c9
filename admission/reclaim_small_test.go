package admission

import (
	"fmt"
	"testing"
)

// TestReclaimBySmallPreemptors: a serving queue scales up by 28 one-GPU
// replicas while a training queue borrows 28 of its GPUs in eight 4-GPU
// jobs. Reclaim must preempt exactly the seven jobs that make training
// stop borrowing, admit all 28 replicas, and never re-admit a victim on
// quota the replicas need — whether the replicas arrive at once or a few
// per cycle, as a Deployment controller creates them.
func TestReclaimBySmallPreemptors(t *testing.T) {
	for _, perCycle := range []int{28, 3} {
		for _, lag := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d per cycle, writes lag a cycle %v", perCycle, lag), func(t *testing.T) { reclaimBySmall(t, perCycle, lag) })
		}
	}
}

// reclaimBySmall runs the scenario; with lag, the evictions and admissions
// a cycle decides reach the engine only after the next cycle, as the
// controller's writes and the victims' termination take time.
func reclaimBySmall(t *testing.T, perCycle int, lag bool) {
	e := newEngine(t, Options{})
	mustCQ(t, e, newCQ("serving", "co", []string{"h200"}, []int64{30}, borrowLimit(0), preempt(PreemptionPolicy{ReclaimWithinCohort: PreemptAny})),
		newCQ("training", "co", []string{"h200"}, []int64{4}, borrowLimit(30)))
	var all []Workload
	for i := range 8 {
		all = append(all, running(job(fmt.Sprintf("t%d", i), "training", 0, int64(i+1), 1, 4), "training", int64(10+i)))
	}
	for i := range 2 {
		all = append(all, running(job(fmt.Sprintf("s%d", i), "serving", 0, int64(20+i), 1, 1), "serving", int64(30+i)))
	}
	var replicas []Workload
	for i := range 28 {
		replicas = append(replicas, job(fmt.Sprintf("r%02d", i), "serving", 0, int64(40+i), 1, 1))
	}
	mustWL(t, e, all...)
	all = append(all, replicas...)
	specs := specMap(all...)
	victims, holding, preemptions := map[string]bool{}, map[string]bool{}, 0
	for _, w := range all {
		holding[w.Key.Name] = w.Admission != nil
	}
	// Every replica present preempts in the cycle it arrives, planned on
	// the replicas already preempting (preempt_stack.go): all seven victims
	// go in the first cycle when the burst comes at once.
	var late []Result
	allIn := -1 // the round in which the last replica was admitted
	for round := range 40 {
		if from := round * perCycle; from < len(replicas) {
			mustWL(t, e, replicas[from:min(from+perCycle, len(replicas))]...)
		}
		res := cycle(t, e)
		preemptions += len(res.Preemptions)
		for _, p := range res.Preemptions {
			victims[p.Victim.Name] = true
			holding[p.Victim.Name] = false
		}
		for _, n := range admittedNames(res) {
			holding[n] = true
		}
		if round == 0 && perCycle == len(replicas) && len(res.Preemptions) != 7 {
			t.Errorf("first cycle: %d preemptions, want all 7 at once: %s", len(res.Preemptions), fmtResult(res))
		}
		if allIn < 0 && allHeld(holding, replicas) {
			allIn = round
		}
		late = append(late, res)
		if lag && len(late) < 2 {
			continue
		}
		evict(t, e, specs, late[0])
		confirm(t, e, specs, late[0])
		late = late[1:]
	}
	// The victims' evictions reach the engine after the cycle (a cycle later
	// with lag); the replicas are admitted in the cycle after that.
	if want := (len(replicas)+perCycle-1)/perCycle + map[bool]int{false: 0, true: 1}[lag]; allIn < 0 || allIn > want {
		t.Errorf("all replicas admitted in round %d, want by round %d: reclaim took more than one round of terminations", allIn, want)
	}
	if preemptions != 7 {
		t.Errorf("%d preemptions, want 7: a victim queued again took quota a replica waited for, and was preempted again", preemptions)
	}
	if len(victims) != 7 {
		t.Errorf("%d training jobs preempted (%v), want the 7 that borrow", len(victims), victims)
	}
	if serving, training := heldGPUs(specs, holding); serving != 30 || training != 4 {
		t.Errorf("admitted GPUs: serving %d, training %d; want 30 and 4", serving, training)
	}
}

// heldGPUs sums the GPUs of the workloads holding quota, serving's and
// training's.
func heldGPUs(specs map[string]Workload, holding map[string]bool) (serving, training int64) {
	for name, held := range holding {
		if !held {
			continue
		}
		w := specs[name]
		gpus := int64(w.PodSets[0].Count) * w.PodSets[0].Requests[gpu] / 1000
		if w.ClusterQueue == "serving" {
			serving += gpus
		} else {
			training += gpus
		}
	}
	return serving, training
}

// allHeld reports whether every workload of ws holds quota.
func allHeld(holding map[string]bool, ws []Workload) bool {
	for _, w := range ws {
		if !holding[w.Key.Name] {
			return false
		}
	}
	return true
}

// TestScaleUpAdmitsAllThatFitInOneCycle: a LeaderWorkerSet scaled from 1 to
// 20 rack-bound replicas (gangs of two 8-GPU pods) whose queue has quota
// for 4 has the 3 that quota allows admitted in the cycle they arrive, each
// in a rack, and the other 16 waiting for quota.
func TestScaleUpAdmitsAllThatFitInOneCycle(t *testing.T) {
	var nodes []Node
	for r := range 5 {
		for h := range 2 {
			nodes = append(nodes, rackNode(fmt.Sprintf("n%d%d", r, h), "a", fmt.Sprintf("r%d", r), 8))
		}
	}
	e := topoEngine(t, nodes...)
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{64}))
	first := gang("replica-00", 2, 8, TopologyRequired, rackKey)
	mustWL(t, e, first)
	specs := specMap(first)
	res := cycle(t, e)
	confirm(t, e, specs, res)
	var added []Workload
	for i := 1; i < 20; i++ {
		w := gang(fmt.Sprintf("replica-%02d", i), 2, 8, TopologyRequired, rackKey)
		w.CreationTime = int64(10 + i)
		added = append(added, w)
	}
	mustWL(t, e, added...)
	res = cycle(t, e)
	if got := admittedNames(res); len(got) != 3 {
		t.Fatalf("admitted %v in the cycle the replicas arrived, want the 3 that quota allows: %s", got, fmtResult(res))
	}
	racks := map[string]bool{}
	for _, a := range res.Admitted {
		if a.Admission.Topology == nil || racks[a.Admission.Topology.Domain[1]] {
			t.Fatalf("replica %s placed %+v: want a rack of its own", a.Key.Name, a.Admission.Topology)
		}
		racks[a.Admission.Topology.Domain[1]] = true
	}
	waiting := 0
	for _, p := range res.Pending {
		if p.Reason == InsufficientQuota {
			waiting++
		}
	}
	if waiting != 16 {
		t.Fatalf("%d replicas report InsufficientQuota, want 16: %s", waiting, fmtResult(res))
	}
}
