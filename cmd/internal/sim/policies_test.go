package sim

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// oneRack is a rack of three 8-GPU nodes that cannot grow, one team.
const oneRack = `
apiVersion: berth.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h200}
spec:
  nodeLabels: {nvidia.com/gpu.product: NVIDIA-H200}
  topologyLevels: [example.com/rack, kubernetes.io/hostname]
  provisioning: {mode: IfNeeded}
---
apiVersion: berth.dev/v1alpha1
kind: CapacityPool
metadata: {name: rack-a}
spec:
  flavor: h200
  minNodes: 3
  maxNodes: 3
  nodeTemplate:
    labels: {nvidia.com/gpu.product: NVIDIA-H200, example.com/rack: a}
    allocatable: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
---
apiVersion: berth.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: h200
      resources:
      - {name: cpu, nominalQuota: "960"}
      - {name: memory, nominalQuota: 10Ti}
      - {name: nvidia.com/gpu, nominalQuota: "80"}
---
apiVersion: berth.dev/v1alpha1
kind: LocalQueue
metadata: {name: train, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: sim.berth.dev/v1alpha1
kind: Model
drain: 4h
`

func readScenarioString(t *testing.T, s string) Scenario {
	t.Helper()
	sc, err := ReadScenario(strings.NewReader(s), "test")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func readScenarioFile(t *testing.T, path string) Scenario {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := ReadScenario(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// gangJob is a training gang of pods × 8 GPUs that runs for an hour.
func gangJob(id, ns string, submit time.Duration, pods int32, topology trace.Topology) trace.Job {
	return trace.Job{ID: id, Submit: submit, Namespace: ns, LocalQueue: "train", Kind: trace.Training, Pods: pods, Topology: topology, RunTime: time.Hour,
		Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("90"), "memory": resource.MustParse("900Gi")}}
}

// runPolicy runs one policy and returns the run, to look at its jobs, and
// its decisions log.
func runPolicy(t *testing.T, sc Scenario, tr trace.Trace, policy string) (*run, PolicyResult) {
	t.Helper()
	r := newRun(sc, tr, "nvidia.com/gpu", 1)
	r.log = &bytes.Buffer{}
	if err := r.use(policy); err != nil {
		t.Fatal(err)
	}
	res, err := r.simulate(policy)
	if err != nil {
		t.Fatal(err)
	}
	return r, res
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestAPartialGangHoldsGPUsOnlyWithoutAQueue: two gangs of two 8-GPU pods
// on three nodes. Without a queue the second gang binds one pod and holds
// its node idle for the first gang's hour; berth admits it only when it
// fits, so the node is idle and free for others meanwhile.
func TestAPartialGangHoldsGPUsOnlyWithoutAQueue(t *testing.T) {
	sc := readScenarioString(t, oneRack)
	tr := trace.Trace{Jobs: []trace.Job{
		gangJob("a", "team-a", 0, 2, trace.Topology{}),
		gangJob("b", "team-a", time.Second, 2, trace.Topology{}),
	}}
	held := 8 * (time.Hour - time.Second).Hours()
	cases := []struct {
		policy                 string
		partial, idleWhileWait float64
	}{
		{Uncoordinated, held, 0},
		{Berth, 0, held},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			r, res := runPolicy(t, sc, tr, tc.policy)
			if res.Started != 2 {
				t.Fatalf("started %d of 2", res.Started)
			}
			if got := r.jobs[1].firstStart; got != time.Hour {
				t.Errorf("b started at %s, want 1h, when a ends", got)
			}
			if !near(res.GPUHours.Partial, tc.partial) || !near(res.GPUHours.IdleWhileWaiting, tc.idleWhileWait) {
				t.Errorf("partial %.4f and idle while waiting %.4f GPU-hours, want %.4f and %.4f",
					res.GPUHours.Partial, res.GPUHours.IdleWhileWaiting, tc.partial, tc.idleWhileWait)
			}
			if !near(res.GPUHours.Busy, 32) {
				t.Errorf("busy %.4f GPU-hours, want 32: two gangs of 16 GPUs for an hour", res.GPUHours.Busy)
			}
		})
	}
}

// TestAGangFailsOverFromARackOutOfStock: rack a is out of stock for two
// hours (testdata/two-racks.yaml). berth books its gang in rack a, hears
// "no capacity" for capacityNotFoundSeconds, and books rack b; the gang
// runs there once the new node joins. Quota-only books anywhere: the
// autoscaler counts the free nodes of both racks, and the gang, whose pods
// must share a rack, never runs whole.
func TestAGangFailsOverFromARackOutOfStock(t *testing.T) {
	sc := readScenarioFile(t, "testdata/two-racks.yaml")
	tr := trace.Trace{Jobs: []trace.Job{gangJob("g", "team-a", 0, 3, trace.Topology{Mode: trace.Required, Level: "example.com/rack"})}}

	r, res := runPolicy(t, sc, tr, Berth)
	j := r.jobs[0]
	// The first answer at the 10 s scan, 300 s of "no capacity", a 10 s
	// backoff, the next scan and a 5 min boot.
	if j.firstStart < 10*time.Minute || j.firstStart > 11*time.Minute {
		t.Fatalf("berth started the gang at %s, want between 10m and 11m", j.firstStart)
	}
	if res.ScaleUps.Total != 1 || res.ScaleUps.UsedByJob != 1 {
		t.Errorf("berth's scale-ups %+v, want one node, used", res.ScaleUps)
	}
	log := r.log.(*bytes.Buffer).String()
	for _, want := range []string{"g-1 (best-effort-atomic-scale-up.autoscaling.x-k8s.io) in example.com/rack=a", "found no capacity for 5m0s",
		"capacity provisioned by g-2 (best-effort-atomic-scale-up.autoscaling.x-k8s.io) in example.com/rack=b"} {
		if !strings.Contains(log, want) {
			t.Errorf("the decisions do not say %q:\n%s", want, log)
		}
	}
	_, qo := runPolicy(t, sc, tr, QuotaOnly)
	if qo.Started != 0 || qo.GPUHours.Partial <= 0 {
		t.Errorf("quota-only started %d with %.1f partial GPU-hours, want a partial gang that never runs", qo.Started, qo.GPUHours.Partial)
	}
}

// TestBusyGPUHoursAreTheWorkDone checks the meter against the trace: a
// policy that evicts nothing and finishes every job keeps GPUs busy for
// exactly the trace's work.
func TestBusyGPUHoursAreTheWorkDone(t *testing.T) {
	sc, tr := shipped(t, "mixed-training")
	var work float64
	for _, j := range tr.Jobs {
		q := j.Requests["nvidia.com/gpu"]
		work += float64(j.Pods) * float64(q.Value()) * j.RunTime.Hours()
	}
	checked := 0
	for _, p := range Policies() {
		_, res := runPolicy(t, sc, tr, p)
		if res.Evictions > 0 || res.Started != res.Jobs {
			continue // the identity holds for whole, uninterrupted runs only
		}
		checked++
		if math.Abs(res.GPUHours.Busy-work) > 1e-6*work {
			t.Errorf("%s: busy %.3f GPU-hours, want the trace's work %.3f", p, res.GPUHours.Busy, work)
		}
	}
	if checked == 0 {
		t.Fatal("no policy ran every job whole: the scenario no longer checks the meter")
	}
}

// simulateByPolicy runs sc over tr with seed 1 and returns the report and
// each policy's result by name.
func simulateByPolicy(t *testing.T, sc Scenario, tr trace.Trace) (Report, map[string]PolicyResult) {
	t.Helper()
	rep, err := Simulate(sc, tr, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]PolicyResult{}
	for _, r := range rep.Results {
		by[r.Policy] = r
	}
	return rep, by
}

// shipped reads a shipped scenario and generates its trace.
func shipped(t *testing.T, name string) (Scenario, trace.Trace) {
	t.Helper()
	return shippedWith(t, name, name)
}

// shippedWith reads the shipped scenario name and generates its trace from
// the mix of the shipped scenario mixOf.
func shippedWith(t *testing.T, name, mixOf string) (Scenario, trace.Trace) {
	t.Helper()
	dir := "../../../test/simulation/"
	sc := readScenarioFile(t, dir+name+"/scenario.yaml")
	f, err := os.Open(dir + mixOf + "/mix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mix, err := trace.ReadMix(f)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Generate(mix, 1)
	if err != nil {
		t.Fatal(err)
	}
	return sc, tr
}

// TestShippedScenarios runs the scenarios docs/coordination.md reports on
// and checks what the report claims of them: berth holds fewer GPUs in
// partial gangs and creates fewer nodes its jobs cannot use than either
// alternative, and every job is accounted for. It also checks that a run
// is deterministic.
func TestShippedScenarios(t *testing.T) {
	for _, name := range []string{"mixed-training", "inference-burst"} {
		t.Run(name, func(t *testing.T) {
			sc, tr := shipped(t, name)
			rep, by := simulateByPolicy(t, sc, tr)
			for _, r := range rep.Results {
				if r.Started+r.GaveUp+r.NeverStarted != r.Jobs {
					t.Errorf("%s: started %d + gave up %d + never %d != %d jobs", r.Policy, r.Started, r.GaveUp, r.NeverStarted, r.Jobs)
				}
			}
			b := by[Berth]
			if b.NeverStarted != 0 {
				t.Errorf("berth left %d jobs never started", b.NeverStarted)
			}
			for _, other := range []string{Uncoordinated, QuotaOnly} {
				o := by[other]
				if b.GPUHours.Partial >= o.GPUHours.Partial {
					t.Errorf("berth holds %.0f GPU-hours in partial gangs, %s %.0f", b.GPUHours.Partial, other, o.GPUHours.Partial)
				}
				if bu, ou := b.ScaleUps.Total-b.ScaleUps.UsedByJob, o.ScaleUps.Total-o.ScaleUps.UsedByJob; bu >= ou {
					t.Errorf("berth created %d nodes its jobs could not use, %s %d", bu, other, ou)
				}
			}
			var first, second bytes.Buffer
			if err := rep.WriteJSON(&first); err != nil {
				t.Fatal(err)
			}
			again, err := Simulate(sc, tr, Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := again.WriteJSON(&second); err != nil {
				t.Fatal(err)
			}
			if first.String() != second.String() {
				t.Error("two runs of the same inputs differ")
			}
		})
	}
}

// TestInputsTheSimulatorCannotRun: what check refuses, and that it says
// what to fix before anything runs.
func TestInputsTheSimulatorCannotRun(t *testing.T) {
	sc := readScenarioString(t, oneRack)
	many := gangJob("m", "team-a", 0, 1, trace.Topology{})
	many.Requests = corev1.ResourceList{}
	for i := range maxResources + 1 {
		many.Requests[corev1.ResourceName("example.com/r"+string(rune('a'+i)))] = resource.MustParse("1")
	}
	cases := []struct {
		name string
		tr   trace.Trace
		opts Options
		want string
	}{
		{"no job", trace.Trace{}, Options{}, "the trace has no job"},
		{"an unknown policy", trace.Trace{Jobs: []trace.Job{gangJob("a", "team-a", 0, 1, trace.Topology{})}},
			Options{Policies: []string{"fifo"}}, `policy "fifo": use [uncoordinated quota-only berth]`},
		{"a LocalQueue not in the scenario", trace.Trace{Jobs: []trace.Job{gangJob("a", "team-z", 0, 1, trace.Topology{})}},
			Options{}, "job a: LocalQueue team-z/train is not in the scenario"},
		{"too many resources", trace.Trace{Jobs: []trace.Job{many}}, Options{}, "name 20 resources; the simulator models at most 16"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Simulate(sc, tc.tr, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestTimelineRecordsAdmissionsAndStarts: on three nodes, gang a takes two
// and gang b of two waits for a's hour. berth admits b only then; without a
// queue b's pods exist from its submission, and it starts at the same
// time. Without Options.Timeline the results carry no timeline.
func TestTimelineRecordsAdmissionsAndStarts(t *testing.T) {
	sc := readScenarioString(t, oneRack)
	tr := trace.Trace{Jobs: []trace.Job{
		gangJob("a", "team-a", 0, 2, trace.Topology{}),
		gangJob("b", "team-a", time.Second, 2, trace.Topology{}),
	}}
	at := func(d time.Duration) *Duration { v := Duration(d); return &v }
	want := map[string][]JobTimes{
		Berth: {{ID: "a", Admitted: at(0), Started: at(0)},
			{ID: "b", Submit: Duration(time.Second), Admitted: at(time.Hour), Started: at(time.Hour)}},
		Uncoordinated: {{ID: "a", Admitted: at(0), Started: at(0)},
			{ID: "b", Submit: Duration(time.Second), Admitted: at(time.Second), Started: at(time.Hour)}},
	}
	rep, err := Simulate(sc, tr, Options{Policies: []string{Uncoordinated, Berth}, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results[0].Policy != Uncoordinated || rep.Results[1].Policy != Berth {
		t.Errorf("results of %s and %s, want them in the order asked for", rep.Results[0].Policy, rep.Results[1].Policy)
	}
	for _, res := range rep.Results {
		if !reflect.DeepEqual(res.Timeline, want[res.Policy]) {
			t.Errorf("%s: timeline %s, want %s", res.Policy, timelineString(res.Timeline), timelineString(want[res.Policy]))
		}
	}
	rep, err = Simulate(sc, tr, Options{Policies: []string{Berth}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results[0].Timeline != nil {
		t.Errorf("timeline %s without Options.Timeline", timelineString(rep.Results[0].Timeline))
	}
}

func timelineString(ts []JobTimes) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "[%s submit %s admitted %v started %v]", t.ID, t.Submit, t.Admitted, t.Started)
	}
	return b.String()
}

// TestLongestFirst: berth's run starts first, then quota-only's.
func TestLongestFirst(t *testing.T) {
	got := longestFirst([]string{Uncoordinated, QuotaOnly, Berth})
	if want := []int{2, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("longestFirst = %v, want %v", got, want)
	}
	if got := longestFirst([]string{QuotaOnly, Uncoordinated}); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("longestFirst(quota-only, uncoordinated) = %v, want [0 1]", got)
	}
}
