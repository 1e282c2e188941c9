package sim

import (
	"os"
	"strings"
	"testing"
	"time"
)

// baseScenario is a valid scenario of four documents (a flavor, a pool, a
// ClusterQueue and its LocalQueue). The bad inputs below add one mistake
// to it, so each fails for that mistake alone, and a document appended to
// it is document 5.
const baseScenario = `apiVersion: berth.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h200}
---
apiVersion: berth.dev/v1alpha1
kind: CapacityPool
metadata: {name: rack-a}
spec:
  flavor: h200
  maxNodes: 4
  nodeTemplate:
    allocatable: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
---
apiVersion: berth.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team-a}
spec: {}
---
apiVersion: berth.dev/v1alpha1
kind: LocalQueue
metadata: {name: train, namespace: team-a}
spec: {clusterQueue: team-a}
`

// withDoc appends documents to the base scenario.
func withDoc(docs ...string) string {
	return baseScenario + "---\n" + strings.Join(docs, "---\n")
}

// model is a Model document with body as its fields.
func model(body string) string {
	return "apiVersion: sim.berth.dev/v1alpha1\nkind: Model\n" + body + "\n"
}

func TestReadScenarioTwoRacks(t *testing.T) {
	f, err := os.Open("testdata/two-racks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := ReadScenario(f, "two-racks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Flavors) != 1 || len(sc.Pools) != 2 || len(sc.ClusterQueues) != 2 || len(sc.LocalQueues) != 2 {
		t.Errorf("read %d flavors, %d pools, %d ClusterQueues, %d LocalQueues; want 1, 2, 2, 2",
			len(sc.Flavors), len(sc.Pools), len(sc.ClusterQueues), len(sc.LocalQueues))
	}
	m := sc.Model
	durations := []struct {
		field string
		got   Duration
		want  time.Duration
	}{
		{"autoscaler.scanInterval (default)", m.Autoscaler.ScanInterval, 10 * time.Second},
		{"autoscaler.scaleDownDelay (default)", m.Autoscaler.ScaleDownDelay, 10 * time.Minute},
		{"autoscaler.bookingExpiry (default)", m.Autoscaler.BookingExpiry, 10 * time.Minute},
		{"autoscaler.initialBackoff (default)", m.Autoscaler.InitialBackoff, time.Minute},
		{"autoscaler.maxBackoff (default)", m.Autoscaler.MaxBackoff, 10 * time.Minute},
		{"sampleEvery (default)", m.SampleEvery, 5 * time.Minute},
		{"drain (explicit)", m.Drain, 12 * time.Hour},
		{"groups[rack-a].latency.fixed", m.Groups["rack-a"].Latency.Fixed, 5 * time.Minute},
	}
	for _, d := range durations {
		if time.Duration(d.got) != d.want {
			t.Errorf("%s = %s, want %s", d.field, d.got, d.want)
		}
	}
	if m.Scheduler.Scoring != LeastAllocated {
		t.Errorf("scheduler.scoring = %q, want the default %q", m.Scheduler.Scoring, LeastAllocated)
	}
	if s := m.Groups["rack-a"].Stockouts; len(s) != 1 || s[0].From != 0 || time.Duration(s[0].To) != 2*time.Hour {
		t.Errorf("groups[rack-a].stockouts = %v, want one window from 0s to 2h", s)
	}
}

// TestReadScenarioKeepsExplicitModel checks that defaults fill only what
// the Model leaves unset.
func TestReadScenarioKeepsExplicitModel(t *testing.T) {
	in := withDoc(model(`autoscaler: {scanInterval: 30s, bookingExpiry: 15m}
scheduler: {scoring: MostAllocated}
sampleEvery: 1m`))
	sc, err := ReadScenario(strings.NewReader(in), "explicit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := sc.Model.Autoscaler
	if time.Duration(a.ScanInterval) != 30*time.Second || time.Duration(a.BookingExpiry) != 15*time.Minute {
		t.Errorf("scanInterval %s, bookingExpiry %s; want the explicit 30s and 15m", a.ScanInterval, a.BookingExpiry)
	}
	if time.Duration(a.ScaleDownDelay) != 10*time.Minute {
		t.Errorf("scaleDownDelay %s, want the default 10m", a.ScaleDownDelay)
	}
	if sc.Model.Scheduler.Scoring != MostAllocated || time.Duration(sc.Model.SampleEvery) != time.Minute {
		t.Errorf("scoring %q, sampleEvery %s; want MostAllocated and 1m", sc.Model.Scheduler.Scoring, sc.Model.SampleEvery)
	}
	if time.Duration(sc.Model.Drain) != 24*time.Hour {
		t.Errorf("drain %s, want the default 24h", sc.Model.Drain)
	}
}

// badScenario is an input to ReadScenario and what its error must say.
type badScenario struct {
	name string
	in   string
	// want are substrings of the error: where the problem is and what to
	// do about it. None means the input is valid.
	want []string
}

// badScenarios are the inputs ReadScenario must refuse, after the base
// they are built on, which it must accept.
func badScenarios() []badScenario {
	return []badScenario{
		{"the base scenario is valid", baseScenario, nil},
		{"another apiVersion", withDoc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"),
			[]string{"bad.yaml: document 5 (ConfigMap settings)", `apiVersion "v1"`, "a scenario holds berth.dev/v1alpha1 objects and one sim.berth.dev/v1alpha1 Model"}},
		{"a berth kind the simulator does not read", withDoc("apiVersion: berth.dev/v1alpha1\nkind: Workload\nmetadata: {name: w, namespace: team-a}\n"),
			[]string{"document 5 (Workload w)", `kind "Workload"`, "the simulator reads ResourceFlavor, ClusterQueue, LocalQueue and CapacityPool"}},
		{"a LocalQueue naming a missing ClusterQueue", withDoc("apiVersion: berth.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: train, namespace: team-b}\nspec: {clusterQueue: team-b}\n"),
			[]string{"bad.yaml: ", `LocalQueue team-b/train: ClusterQueue "team-b" is not in the scenario`}},
		{"a CapacityPool naming a missing ResourceFlavor", withDoc(`apiVersion: berth.dev/v1alpha1
kind: CapacityPool
metadata: {name: rack-b}
spec:
  flavor: a100
  maxNodes: 2
  nodeTemplate: {allocatable: {nvidia.com/gpu: "8"}}
`), []string{`CapacityPool rack-b: ResourceFlavor "a100" is not in the scenario`}},
		{"a CapacityPool with nothing allocatable", withDoc(`apiVersion: berth.dev/v1alpha1
kind: CapacityPool
metadata: {name: rack-b}
spec: {flavor: h200, maxNodes: 2, nodeTemplate: {allocatable: {}}}
`), []string{"CapacityPool rack-b: nodeTemplate.allocatable is empty"}},
		{"a group for a missing pool", withDoc(model("groups: {rack-z: {latency: {fixed: 5m}}}")),
			[]string{"model.groups[rack-z]: no CapacityPool of that name"}},
		{"a latency with neither fixed nor median", withDoc(model("groups: {rack-a: {latency: {sigma: 0.3}}}")),
			[]string{"model.groups[rack-a].latency: set fixed, or median (and sigma) for a log-normal"}},
		{"a negative latency", withDoc(model("groups: {rack-a: {latency: {fixed: -5m}}}")),
			[]string{"model.groups[rack-a].latency: durations and sigma must not be negative"}},
		{"max below min", withDoc(model("groups: {rack-a: {latency: {median: 5m, min: 10m, max: 2m}}}")),
			[]string{"model.groups[rack-a].latency: max (2m0s) must not be below min (10m0s)"}},
		{"a negative existing", withDoc(model("groups: {rack-a: {existing: -1, latency: {fixed: 5m}}}")),
			[]string{"model.groups[rack-a].existing: must not be negative, got -1"}},
		{"a stockout that ends before it starts", withDoc(model("groups: {rack-a: {latency: {fixed: 5m}, stockouts: [{from: 2h, to: 1h}]}}")),
			[]string{"model.groups[rack-a].stockouts[0]: to (1h0m0s) must be after from (2h0m0s)"}},
		{"an empty stockout", withDoc(model("groups: {rack-a: {latency: {fixed: 5m}, stockouts: [{from: 1h, to: 1h}]}}")),
			[]string{"model.groups[rack-a].stockouts[0]: to (1h0m0s) must be after from (1h0m0s)"}},
		{"racks without rackLabel", withDoc(model("groups: {rack-a: {latency: {fixed: 5m}, racks: [a, b]}}")),
			[]string{"model.groups[rack-a]: racks need rackLabel"}},
		{"two Models", withDoc(model("drain: 1h"), model("sampleEvery: 1m")),
			[]string{"document 6: a second sim.berth.dev/v1alpha1 Model; put the whole model in one"}},
		{"an unknown scoring", withDoc(model("scheduler: {scoring: Random}")),
			[]string{`model.scheduler.scoring "Random": use LeastAllocated or MostAllocated`}},
		{"a duration written as a number", withDoc(model("drain: 5")),
			[]string{"document 5 (Model)", "reading the model", `duration 5: write it as a string such as "90s" or "10m"`}},
		{"a duration without a unit", withDoc(model(`drain: "5"`)),
			[]string{"document 5 (Model)", `duration "5"`, "missing unit"}},
		{"an unknown field in the Model", withDoc(model("drian: 12h")),
			[]string{"document 5 (Model)", "reading the model", `unknown field "drian"`}},
		{"an unknown field in a berth object", withDoc("apiVersion: berth.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: a100}\nspec: {nodeLabel: {a: b}}\n"),
			[]string{"document 5 (ResourceFlavor a100)", `unknown field "nodeLabel"`}},
		{"no CapacityPool", `apiVersion: berth.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: h200}
`, []string{"bad.yaml: no CapacityPool: the cluster has no nodes; describe each node group as a CapacityPool"}},
		{"not YAML", baseScenario + "---\nkind: [\n", []string{"bad.yaml: document 5"}},
	}
}

func TestReadScenarioErrors(t *testing.T) {
	for _, tc := range badScenarios() {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadScenario(strings.NewReader(tc.in), "bad.yaml")
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestReadModel(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		wantErr string
		// drain is the Model's drain when reading succeeds; ReadModel
		// leaves defaults to Complete, so unset stays zero.
		drain time.Duration
	}{
		{"a lone Model", model("drain: 3h\ngroups: {rack-a: {latency: {fixed: 5m}}}"), "", 3 * time.Hour},
		{"a Model without drain keeps it unset", model("sampleEvery: 1m"), "", 0},
		{"a Model with berth objects", withDoc(model("drain: 3h")), "model.yaml: holds berth objects; with objects from the cluster the file holds only the sim.berth.dev/v1alpha1 Model", 0},
		{"an unknown field", model("drian: 3h"), `unknown field "drian"`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ReadModel(strings.NewReader(tc.in), "model.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Duration(m.Drain) != tc.drain {
				t.Errorf("drain = %s, want %s", m.Drain, tc.drain)
			}
		})
	}
	m, err := ReadModel(strings.NewReader(model("groups: {rack-a: {latency: {fixed: 5m}}}")), "model.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := m.Groups["rack-a"]; !ok || time.Duration(g.Latency.Fixed) != 5*time.Minute {
		t.Errorf("groups = %+v, want rack-a with a fixed 5m latency", m.Groups)
	}
}

// TestAGroupWithoutLatencyTakesTheDefault: a group described only by its
// stockouts boots its nodes in DefaultGroup's time.
func TestAGroupWithoutLatencyTakesTheDefault(t *testing.T) {
	m := Model{Groups: map[string]GroupModel{"rack-a": {Stockouts: []Window{{From: 0, To: Duration(time.Hour)}}}}}
	g := m.group("rack-a")
	if g.Latency != DefaultGroup().Latency || len(g.Stockouts) != 1 {
		t.Fatalf("group %+v, want the default latency and its stockout", g)
	}
	if errs := g.validate("g"); len(errs) != 0 {
		t.Fatalf("valid group refused: %v", errs)
	}
}
