package sim

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// TestSplitNeverFits checks which jobs testdata/two-racks.yaml (two
// racks of at most six 8-GPU nodes) can never hold.
func TestSplitNeverFits(t *testing.T) {
	sc := readScenarioFile(t, "testdata/two-racks.yaml")
	rack := trace.Topology{Mode: trace.Required, Level: "example.com/rack"}
	host := trace.Topology{Mode: trace.Required, Level: corev1.LabelHostname}
	tests := []struct {
		name string
		job  trace.Job
		fits bool
	}{
		{name: "every node of both racks", job: gangJob("j", "team-a", 0, 12, trace.Topology{}), fits: true},
		{name: "one more than both racks", job: gangJob("j", "team-a", 0, 13, trace.Topology{})},
		{name: "a whole rack", job: gangJob("j", "team-a", 0, 6, rack), fits: true},
		{name: "more than one rack, rack required", job: gangJob("j", "team-a", 0, 7, rack)},
		{name: "more than one rack, rack preferred", job: gangJob("j", "team-a", 0, 7, trace.Topology{Mode: trace.Preferred, Level: "example.com/rack"}), fits: true},
		{name: "one node", job: gangJob("j", "team-a", 0, 1, host), fits: true},
		{name: "two nodes' worth on one node", job: gangJob("j", "team-a", 0, 2, host)},
		{name: "a level no node has", job: gangJob("j", "team-a", 0, 1, trace.Topology{Mode: trace.Required, Level: "example.com/row"})},
		{name: "a selector a rack matches", job: withSelector(gangJob("j", "team-a", 0, 6, trace.Topology{}), "example.com/rack", "b"), fits: true},
		{name: "a selector one rack cannot hold", job: withSelector(gangJob("j", "team-a", 0, 7, trace.Topology{}), "example.com/rack", "b")},
		{name: "a selector no node matches", job: withSelector(gangJob("j", "team-a", 0, 1, trace.Topology{}), "nvidia.com/gpu.product", "B200")},
		{name: "a pod larger than a node", job: withGPUs(gangJob("j", "team-a", 0, 1, trace.Topology{}), "16")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, left := splitNeverFits(sc, trace.Trace{Jobs: []trace.Job{tt.job}}, "nvidia.com/gpu")
			if fits := len(kept.Jobs) == 1; fits != tt.fits || left.Jobs == 0 == !tt.fits {
				t.Errorf("kept %d, left out %+v; want fits=%v", len(kept.Jobs), left, tt.fits)
			}
		})
	}
}

func withSelector(j trace.Job, k, v string) trace.Job {
	j.NodeSelector = map[string]string{k: v}
	return j
}

func withGPUs(j trace.Job, gpus string) trace.Job {
	j.Requests["nvidia.com/gpu"] = resource.MustParse(gpus)
	return j
}

// TestSimulateLeavesOutJobsThatNeverFit: a gang larger than the cluster
// is left out, named, and does not count the cluster's idle GPUs as idle
// while waiting.
func TestSimulateLeavesOutJobsThatNeverFit(t *testing.T) {
	sc := readScenarioFile(t, "testdata/two-racks.yaml")
	fits := gangJob("fits", "team-a", 0, 2, trace.Topology{})
	huge := gangJob("huge", "team-b", time.Minute, 13, trace.Topology{})
	bigger := gangJob("bigger", "team-b", 2*time.Minute, 20, trace.Topology{})
	opts := Options{Seed: 1, Policies: []string{Uncoordinated, Berth}}
	rep, err := Simulate(sc, trace.Trace{Jobs: []trace.Job{fits, huge, bigger}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := LeftOut{Jobs: 2, Largest: "bigger", LargestPods: 20, LargestGPUs: 160}
	if rep.Jobs != 1 || rep.LeftOut != want {
		t.Errorf("ran %d jobs, left out %+v; want 1 and %+v", rep.Jobs, rep.LeftOut, want)
	}
	alone, err := Simulate(sc, trace.Trace{Jobs: []trace.Job{fits}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rep.Results {
		if r.Jobs != 1 || r.GPUHours != alone.Results[i].GPUHours {
			t.Errorf("%s: %d jobs, GPU-hours %+v; want 1 and those of the job alone, %+v", r.Policy, r.Jobs, r.GPUHours, alone.Results[i].GPUHours)
		}
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if want := "2 jobs left out: they can never fit the modelled cluster (the largest, bigger, asks for 20 pods and 160 GPUs)"; !strings.Contains(table.String(), want) {
		t.Errorf("the table does not say %q:\n%s", want, table.String())
	}
	_, err = Simulate(sc, trace.Trace{Jobs: []trace.Job{huge}}, opts)
	if err == nil || !strings.Contains(err.Error(), "none of the trace's 1 jobs can ever fit") {
		t.Errorf("err = %v, want none can ever fit", err)
	}
}

// TestSimulateRefusesOversizedTraces: a trace built in code is held to the
// caps before any pod is allocated.
func TestSimulateRefusesOversizedTraces(t *testing.T) {
	sc := readScenarioFile(t, "testdata/two-racks.yaml")
	tests := []struct {
		name string
		tr   trace.Trace
		want string
	}{
		{name: "pods of one job", tr: trace.Trace{Jobs: []trace.Job{gangJob("j", "team-a", 0, 2_000_000_000, trace.Topology{})}},
			want: "pods must be at most 100000"},
		{name: "pods in all", tr: func() trace.Trace {
			var tr trace.Trace
			for i := range 21 {
				tr.Jobs = append(tr.Jobs, gangJob("j"+strings.Repeat("x", i), "team-a", 0, trace.MaxJobPods, trace.Topology{}))
			}
			return tr
		}(), want: "more than the simulator takes (2000000)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Simulate(sc, tt.tr, Options{Seed: 1})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestScaleUpsBySortOfUse: nodes created for a job are counted as used by
// it, used by another job, or never used (of which half-gang ones held
// part of their job's gang).
func TestScaleUpsBySortOfUse(t *testing.T) {
	sc := readScenarioString(t, oneRack)
	tr := trace.Trace{Jobs: []trace.Job{gangJob("a", "team-a", 0, 1, trace.Topology{}), gangJob("b", "team-a", 0, 1, trace.Topology{})}}
	r := newRun(sc, tr, "nvidia.com/gpu", 1)
	g := r.c.groups[0]
	own, taken := r.c.newNode(g, 0, "a"), r.c.newNode(g, 0, "a")
	r.c.newNode(g, 0, "b") // never used
	half := r.c.newNode(g, 0, "c")
	half.triggerBound = true
	a, b := r.jobs[0], r.jobs[1]
	a.pods = []*pod{{job: a, node: own, requests: a.requests}}
	b.pods = []*pod{{job: b, node: taken, requests: b.requests}}
	r.m.started(a)
	r.m.started(b)
	got := r.m.result("test").ScaleUps
	want := scaleUpCounts{Total: 4, UsedByJob: 1, UsedByOther: 1, NeverUsed: 2, HalfGang: 1}
	if got != want {
		t.Errorf("scale-ups %+v, want %+v", got, want)
	}
}
