package runner

import (
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/perf/scenario"
)

// twoSmall: one ClusterQueue (c-0-q0) with 1 cpu, two 1-cpu workloads.
const twoSmall = `
name: t
cohorts: [{name: c, count: 1, clusterQueues: 1, quota: [{resource: cpu, nominal: "1"}]}]
workloadClasses:
- {name: small, count: 2, interval: 0s, runtime: 10ms, request: {cpu: "1"}}
`

// state is a Workload state the tracker may see.
type state func(wl *berthv1.Workload)

// apply carries out lifecycle transitions on wl; the fixtures are built
// only from allowed ones.
func apply(wl *berthv1.Workload, ts ...lifecycle.Transition) {
	for _, t := range ts {
		if err := lifecycle.Apply(wl, t, metav1.Now()); err != nil {
			panic(err)
		}
	}
}

func pending(reason string) state {
	return func(wl *berthv1.Workload) {
		apply(wl, lifecycle.Queue{Reason: berthv1.WorkloadReason(reason), Message: "waits"})
	}
}

func admitted(wl *berthv1.Workload) {
	apply(wl, lifecycle.Admit{Admission: &berthv1.Admission{ClusterQueue: "c-0-q0"}, Generation: wl.Generation, Message: "admitted"})
}

func evicting(wl *berthv1.Workload) {
	admitted(wl)
	apply(wl, lifecycle.Evict{Reason: berthv1.ReasonPreempted, Message: "preempted"})
}

func requeued(wl *berthv1.Workload) {
	evicting(wl)
	apply(wl, lifecycle.Requeue{Message: "requeued"})
}

func finished(wl *berthv1.Workload) {
	admitted(wl)
	apply(wl, lifecycle.Finish{Succeeded: true, Message: "done"})
}

// step shows the tracker workload name in a state, written at revision rv
// (default: the step's position).
type step struct {
	name  string
	state state
	rv    int
}

// trackerCase is a sequence of states and what the tracker makes of it.
type trackerCase struct {
	name          string
	steps         []step
	usage         int64 // milli-cpu in use at the end
	actions       []actionKind
	reasonChanges int
	violations    int
	done          bool
}

func TestTracker(t *testing.T) {
	tests := []trackerCase{
		{
			name:    "an admission holds quota and asks for a finish after the runtime",
			steps:   []step{{"small-0", pending("InsufficientQuota"), 0}, {"small-0", admitted, 0}},
			usage:   1000,
			actions: []actionKind{actionFinish}, reasonChanges: 1,
		},
		{
			name:  "a finish seen by the watch releases the quota",
			steps: []step{{"small-0", admitted, 0}, {"small-0", finished, 0}, {"small-1", admitted, 0}, {"small-1", finished, 0}},
			usage: 0, actions: []actionKind{actionFinish, actionFinish}, done: true,
		},
		{
			name:    "an eviction releases the quota and asks for a requeue; a new admission charges again",
			steps:   []step{{"small-0", admitted, 0}, {"small-0", evicting, 0}, {"small-0", requeued, 0}, {"small-0", admitted, 0}},
			usage:   1000,
			actions: []actionKind{actionRequeue, actionFinish},
		},
		{
			name:    "an eviction seen again asks for one requeue",
			steps:   []step{{"small-0", admitted, 0}, {"small-0", evicting, 0}, {"small-0", evicting, 0}},
			actions: []actionKind{actionRequeue},
		},
		{
			name:    "an eviction seen without its admission (the watch relisted) still asks for a requeue and releases nothing",
			steps:   []step{{"small-1", admitted, 0}, {"small-0", evicting, 0}},
			usage:   1000,
			actions: []actionKind{actionRequeue, actionFinish},
		},
		{
			name: "each eviction asks for its own requeue",
			steps: []step{{"small-0", admitted, 0}, {"small-0", evicting, 0}, {"small-0", requeued, 0}, {"small-0", admitted, 0},
				{"small-0", evicting, 0}},
			actions: []actionKind{actionRequeue, actionRequeue},
		},
		{
			name: "pending reasons count once per change; a requeue's Pending is not berth's",
			steps: []step{{"small-0", pending("InsufficientQuota"), 0}, {"small-0", pending("InsufficientQuota"), 0},
				{"small-0", pending("ReservedForHead"), 0}, {"small-0", pending(string(berthv1.ReasonPending)), 0}},
			reasonChanges: 2,
		},
		{
			name:  "more quota in use than the queue has is a violation",
			steps: []step{{"small-0", admitted, 0}, {"small-1", admitted, 0}},
			usage: 2000, actions: []actionKind{actionFinish, actionFinish}, violations: 1,
		},
		{
			name: "quota is checked in write order, not in the order the watch delivers",
			steps: []step{{"small-0", admitted, 1}, {"small-1", admitted, 3}, {"small-0", finished, 2},
				{"small-1", finished, 4}},
			actions: []actionKind{actionFinish, actionFinish}, done: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := scenario.Parse([]byte(twoSmall))
			if err != nil {
				t.Fatal(err)
			}
			tr := newTracker(s, ModeWorkloads)
			for n, st := range tc.steps {
				rv := st.rv
				if rv == 0 {
					rv = n + 1
				}
				wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "c-0-q0", Name: st.name, ResourceVersion: strconv.Itoa(rv)}}
				st.state(wl)
				tr.observe(wl)
			}
			checkTracker(t, tr, tc)
		})
	}
}

func checkTracker(t *testing.T, tr *tracker, tc trackerCase) {
	t.Helper()
	if got := tr.usage[0][0]; got != tc.usage {
		t.Errorf("usage = %d, want %d", got, tc.usage)
	}
	if got := tr.recs[0].reasonChanges; got != tc.reasonChanges {
		t.Errorf("pending reasons counted = %d, want %d", got, tc.reasonChanges)
	}
	violations, err := tr.quotaViolations()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(violations); got != tc.violations {
		t.Errorf("violations = %v, want %d", violations, tc.violations)
	}
	for i, want := range tc.actions {
		select {
		case a := <-tr.actions:
			if a.kind != want {
				t.Errorf("action %d = %v, want %v", i, a.kind, want)
			}
		case <-time.After(time.Second):
			t.Fatalf("no action %d (want %v)", i, want)
		}
	}
	if n := len(tr.actions); n > 0 {
		t.Errorf("%d more actions than %v", n, tc.actions)
	}
	select {
	case <-tr.done:
		if !tc.done {
			t.Error("the tracker is done, want not")
		}
	default:
		if tc.done {
			t.Error("the tracker is not done, want done")
		}
	}
}

func TestTrackerJobs(t *testing.T) {
	s, err := scenario.Parse([]byte(twoSmall))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker(s, ModeJobs)
	wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "c-0-q0", Name: "job-small-0-abcde", ResourceVersion: "7",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "small-0", Controller: ptr.To(true)}}}}
	admitted(wl)
	tr.observe(wl)
	if tr.usage[0][0] != 1000 || !tr.recs[0].running {
		t.Fatalf("after admission: usage %d, running %v; want 1000, true", tr.usage[0][0], tr.recs[0].running)
	}
	tr.deleted(toolscache.DeletedFinalStateUnknown{Key: "c-0-q0/job-small-0-abcde", Obj: wl})
	if tr.usage[0][0] != 0 || tr.recs[0].finished.IsZero() {
		t.Errorf("after deletion: usage %d, finished %v; want 0 and finished", tr.usage[0][0], tr.recs[0].finished)
	}
}
