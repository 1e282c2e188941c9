package commands

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/cmd/internal/sim"
	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

const (
	twoRacks         = "../../internal/sim/testdata/two-racks.yaml"
	mixedTrainingDir = "../../../test/simulation/mixed-training/"
	traceHeader      = "id,submit,namespace,localQueue,kind,class,priority,pods,requests,nodeSelector,topologyMode,topologyLevel,runTime,slo\n"
	// gangRequests fill most of a two-racks node, so each pod takes a node.
	gangRequests = "cpu=90;memory=900Gi;nvidia.com/gpu=8"
)

// smallTrace is four gangs of whole nodes on two-racks.yaml's queues; the
// last one is inference with an SLO so that the report has an SLO column
// to fill.
const smallTrace = traceHeader +
	"j1,0s,team-a,train,training,large,0,3," + gangRequests + ",,Required,example.com/rack,1h,\n" +
	"j2,1m,team-b,train,training,large,0,3," + gangRequests + ",,Required,example.com/rack,1h,\n" +
	"j3,2m,team-a,train,training,small,0,1," + gangRequests + ",,,,30m,\n" +
	"j4,3m,team-b,train,inference,serve,5,2," + gangRequests + ",,Required,example.com/rack,2h,10m\n"

const smallTraceJobs = 4

// writeFile writes content to name in a new temporary directory and
// returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// simulateJSON runs simulate with args and -o json and decodes the report.
func simulateJSON(t *testing.T, args ...string) (sim.Report, string) {
	t.Helper()
	out, errOut, err := run(append([]string{"simulate", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("simulate %v: %v\nstderr: %s", args, err, errOut)
	}
	var rep sim.Report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a sim.Report: %v\n%s", err, out)
	}
	return rep, errOut
}

func policiesOf(rep sim.Report) []string {
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Policy)
	}
	return names
}

func TestSimulateTable(t *testing.T) {
	tr := writeFile(t, "trace.csv", smallTrace)
	out, _, err := run("simulate", "-f", twoRacks, "--trace", tr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"4 jobs", "POLICY", "END", "STARTED", "NEVER", "GAVE UP", "GPU-H IDLE WHILE WAITING",
		"SCALE-UPS", "SLO MET", "CLASS", "P50", "P99", "CLUSTERQUEUE", "WEIGHT'S SHARE"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, p := range sim.Policies() {
		// A row of the first table: the policy, its end, then the counts.
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(p) + ` +\S+ +\d+ +\d+ `)
		if !row.MatchString(out) {
			t.Errorf("table has no row for %s:\n%s", p, out)
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(p) + ` +team-a `).MatchString(out) {
			t.Errorf("table has no share of team-a under %s:\n%s", p, out)
		}
	}
}

func TestSimulateJSON(t *testing.T) {
	tr := writeFile(t, "trace.csv", smallTrace)
	cases := []struct {
		name     string
		args     []string
		policies []string
		timeline bool
	}{
		{"every policy by default", nil, sim.Policies(), false},
		{"one policy", []string{"--policies", "berth"}, []string{sim.Berth}, false},
		{"two policies in the order given", []string{"--policies", "berth,uncoordinated"}, []string{sim.Berth, sim.Uncoordinated}, false},
		{"with the timeline", []string{"--policies", "berth", "--timeline"}, []string{sim.Berth}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, _ := simulateJSON(t, append([]string{"-f", twoRacks, "--trace", tr}, tc.args...)...)
			if rep.Jobs != smallTraceJobs {
				t.Errorf("jobs = %d, want %d", rep.Jobs, smallTraceJobs)
			}
			if got := policiesOf(rep); strings.Join(got, ",") != strings.Join(tc.policies, ",") {
				t.Fatalf("policies %v, want %v", got, tc.policies)
			}
			for _, r := range rep.Results {
				if r.Jobs != smallTraceJobs || r.Started+r.GaveUp+r.NeverStarted != r.Jobs {
					t.Errorf("%s: jobs %d = started %d + gave up %d + never %d, want %d jobs", r.Policy, r.Jobs, r.Started, r.GaveUp, r.NeverStarted, smallTraceJobs)
				}
				if want := map[bool]int{true: smallTraceJobs}[tc.timeline]; len(r.Timeline) != want {
					t.Errorf("%s: %d jobs in the timeline, want %d", r.Policy, len(r.Timeline), want)
				}
			}
		})
	}
}

func TestSimulatePlots(t *testing.T) {
	tr := writeFile(t, "trace.csv", smallTrace)
	cases := []struct {
		format string
		magic  []byte
	}{
		{"png", []byte("\x89PNG\r\n\x1a\n")},
		{"svg", []byte("<")}, // XML: a declaration or the <svg> element
	}
	for _, tc := range cases {
		t.Run(tc.format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "figures")
			_, errOut, err := run("simulate", "-f", twoRacks, "--trace", tr, "--plots", dir, "--plot-format", tc.format)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"utilization", "start-cdf"} {
				path := filepath.Join(dir, name+"."+tc.format)
				b, err := os.ReadFile(path)
				if err != nil {
					t.Errorf("figure %s: %v", name, err)
					continue
				}
				if !bytes.HasPrefix(b, tc.magic) {
					t.Errorf("%s does not start like a %s file: %q", path, tc.format, b[:min(len(b), 16)])
				}
				if !strings.Contains(errOut, path) {
					t.Errorf("stderr does not list %s: %q", path, errOut)
				}
			}
		})
	}
}

func TestSimulateWriteTrace(t *testing.T) {
	tr := writeFile(t, "trace.csv", smallTrace)
	for _, name := range []string{"out.csv", "out.yaml"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), name)
			if _, errOut, err := run("simulate", "-f", twoRacks, "--trace", tr, "--policies", "uncoordinated", "--write-trace", out); err != nil {
				t.Fatalf("%v\nstderr: %s", err, errOut)
			}
			back, err := trace.Read(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Jobs) != smallTraceJobs {
				t.Errorf("%s holds %d jobs, want %d", out, len(back.Jobs), smallTraceJobs)
			}
		})
	}
}

// TestSimulateGenerate runs the shipped mixed-training scenario once: the
// report covers every policy, and the trace written is the one replayed.
func TestSimulateGenerate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "generated.csv")
	rep, _ := simulateJSON(t, "-f", mixedTrainingDir+"scenario.yaml", "--generate", mixedTrainingDir+"mix.yaml", "--write-trace", out)
	if got := policiesOf(rep); strings.Join(got, ",") != strings.Join(sim.Policies(), ",") {
		t.Errorf("policies %v, want %v", got, sim.Policies())
	}
	if rep.Jobs == 0 {
		t.Fatal("the generated trace has no job")
	}
	back, err := trace.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Jobs) != rep.Jobs {
		t.Errorf("wrote %d jobs, the report counts %d", len(back.Jobs), rep.Jobs)
	}
}

func TestSimulateDecisions(t *testing.T) {
	tr := writeFile(t, "trace.csv", smallTrace)
	log := filepath.Join(t.TempDir(), "decisions.log")
	if _, errOut, err := run("simulate", "-f", twoRacks, "--trace", tr, "--decisions", log); err != nil {
		t.Fatalf("%v\nstderr: %s", err, errOut)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"policy berth", "j1: "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("decisions lack %q:\n%s", want, b)
		}
	}
	// With "-" the log goes to stderr, and stdout stays a JSON report.
	rep, errOut := simulateJSON(t, "-f", twoRacks, "--trace", tr, "--policies", "berth", "--decisions", "-")
	if len(rep.Results) != 1 || !strings.Contains(errOut, "policy berth") {
		t.Errorf("--decisions -: %d results, stderr %q", len(rep.Results), errOut)
	}
}

func TestSimulateErrors(t *testing.T) {
	tr := writeFile(t, "trace.csv", smallTrace)
	strayTrace := writeFile(t, "stray.csv", traceHeader+"x1,0s,team-c,train,training,,,1,"+gangRequests+",,,,1h,\n")
	mix := mixedTrainingDir + "mix.yaml"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"yaml output", []string{"-f", twoRacks, "--trace", tr, "-o", "yaml"}, `--output "yaml": use table or json`},
		{"a timeline in a table", []string{"-f", twoRacks, "--trace", tr, "--timeline"}, "--timeline goes with -o json"},
		{"pdf plots", []string{"-f", twoRacks, "--trace", tr, "--plots", "figs", "--plot-format", "pdf"}, `--plot-format "pdf": use svg or png`},
		{"an unknown policy", []string{"-f", twoRacks, "--trace", tr, "--policies", "berth,fifo"}, `policy "fifo": use [uncoordinated quota-only berth]`},
		{"both --trace and --generate", []string{"-f", twoRacks, "--trace", tr, "--generate", mix},
			"if any flags in the group [trace generate import] are set none of the others can be"},
		{"no trace", []string{"-f", twoRacks}, "at least one of the flags in the group [trace generate import] is required"},
		{"no scenario", []string{"--trace", tr}, "at least one of the flags in the group [filename from-cluster] is required"},
		{"--model without --from-cluster", []string{"-f", twoRacks, "--model", "model.yaml", "--trace", tr}, "--model goes with --from-cluster; put the Model in the scenario file"},
		{"a job on a LocalQueue not in the scenario", []string{"-f", twoRacks, "--trace", strayTrace}, "job x1: LocalQueue team-c/train is not in the scenario"},
		{"a missing scenario file", []string{"-f", "missing.yaml", "--trace", tr}, "reading the scenario: open missing.yaml"},
		{"a missing trace file", []string{"-f", twoRacks, "--trace", "missing.csv"}, "reading trace: open missing.csv"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(append([]string{"simulate"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// publicTrace is a generic export for two-racks.yaml's queues: team names
// its tenant, plan_gpu is percent of one GPU.
const publicTrace = "job_name,timestamp,plan_gpu,runtime,team\n" +
	"p1,0,800,3600,team-a\n" +
	"p2,60,50,1800,team-b\n"

func TestSimulateImport(t *testing.T) {
	cases := []struct {
		name       string
		trace      string
		args       []string
		wantStderr []string
		notStderr  []string
	}{
		{name: "a known tenant column, plan_gpu as percent", trace: publicTrace,
			wantStderr: []string{"imported 2 of 2 rows", "read the GPU column plan_gpu as percent of one GPU, rounded up to whole GPUs"},
			notStderr:  []string{"warning"}},
		{name: "--tenant-column names a column the importer does not know", trace: strings.ReplaceAll(publicTrace, "team\n", "org\n"),
			args: []string{"--tenant-column", "org"}, notStderr: []string{"warning"}},
		{name: "no tenant column: every job in default, with a warning", trace: "job_name,timestamp,gpus,runtime\np1,0,8,3600\n",
			args:       []string{"--local-queue", "train", "-f", writeFile(t, "default-ns.yaml", defaultNamespaceScenario(t))},
			wantStderr: []string{"warning: ", "has no tenant column (vc, virtual_cluster, tenant, team", "every job goes to namespace default", "--tenant-column"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--import", writeFile(t, "public.csv", tc.trace), "--local-queue", "train", "--policies", "berth"}, tc.args...)
			if !slices.Contains(args, "-f") {
				args = append(args, "-f", twoRacks)
			}
			// simulateJSON decodes stdout strictly: a warning there would fail it.
			rep, errOut := simulateJSON(t, args...)
			if rep.Jobs == 0 {
				t.Errorf("no job simulated")
			}
			for _, want := range tc.wantStderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			for _, not := range tc.notStderr {
				if strings.Contains(errOut, not) {
					t.Errorf("stderr has %q:\n%s", not, errOut)
				}
			}
		})
	}
}

// defaultNamespaceScenario is two-racks.yaml with team-a's LocalQueue in
// namespace default, where jobs without a tenant go.
func defaultNamespaceScenario(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(twoRacks)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(string(b), "metadata: {name: train, namespace: team-a}", "metadata: {name: train, namespace: default}", 1)
}

// TestImportColumnsDoc keeps docs/cli.md's list of the importer's column
// names equal to the table the importer reads them from.
func TestImportColumnsDoc(t *testing.T) {
	b, err := os.ReadFile("../../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, after, ok := strings.Cut(doc, "<!-- import-columns:begin -->\n```text\n")
	block, _, ok2 := strings.Cut(after, "```\n<!-- import-columns:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/cli.md has no import-columns block")
	}
	if want := trace.ImportColumnsText(); block != want {
		t.Errorf("docs/cli.md lists other import columns than trace.ImportColumns; replace the block with:\n%s", want)
	}
	out, _, err := run("simulate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, trace.ImportColumnsText()) {
		t.Errorf("simulate --help does not list the import columns:\n%s", out)
	}
}
