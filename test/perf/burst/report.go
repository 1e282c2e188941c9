package burst

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Phase is what one run measured. Times are seconds.
type Phase struct {
	Namespace    string `json:"namespace"`
	ThroughBerth bool   `json:"throughBerth"`
	Gangs        int    `json:"gangs"`
	Pods         int    `json:"pods"`
	// CreateSpan is how long creating every gang took, against the
	// window they were due in.
	CreateSpan float64 `json:"createSpanSeconds"`
	// Complete gangs have every pod bound; Partial ones only some.
	Complete int `json:"complete"`
	Partial  int `json:"partial"`
	// P50, P95 and Max of the complete gangs' time from the creation of
	// their first pod until their last pod was seen bound.
	P50 float64 `json:"p50Seconds"`
	P95 float64 `json:"p95Seconds"`
	Max float64 `json:"maxSeconds"`
	// Workloads admitted by berth (the berth runs only): in the pod-group
	// shape, one per gang shows every gang went through berth.
	Workloads int `json:"admittedWorkloads,omitempty"`
	// Records are the pods that carry berth's admission record at the end
	// of a berth run: replicas admitted without a Workload.
	Records int `json:"podsOnRecords,omitempty"`
	// CPUSeconds each process used from the first creation until the last
	// bind (or the timeout), by component.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
	// WebhookCalls are the requests berth's webhook server answered during
	// the run, by path: the round trips the API server made to berth.
	WebhookCalls map[string]float64 `json:"webhookCalls,omitempty"`
	// BerthWrites are the writes berth sent during the run, by method and
	// resource ("PATCH pods", "PUT workloads/status").
	BerthWrites map[string]int `json:"berthWrites,omitempty"`
	// Stages splits the berth run's time per gang.
	Stages *Stages `json:"stages,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Gangs int `json:"gangs"`
	// Shape is what each gang was (Options.Shape).
	Shape        Shape   `json:"shape"`
	Pods         int     `json:"pods"`
	Nodes        int     `json:"nodes"`
	Window       float64 `json:"windowSeconds"`
	SchedulerQPS int     `json:"schedulerQPS"`
	// JobWorkers and ApplyWorkers are berth's --job-workers and
	// --apply-workers; 0 is berth's default.
	JobWorkers   int    `json:"jobWorkers,omitempty"`
	ApplyWorkers int    `json:"applyWorkers,omitempty"`
	CPUs         int    `json:"cpus"`
	GoVersion    string `json:"goVersion"`
	// Floor is kube-scheduler alone; Berth the same pods through berth,
	// gated by its pod webhook; Policy the same again, gated inside the
	// API server by berth's MutatingAdmissionPolicy.
	Floor  Phase  `json:"floor"`
	Berth  Phase  `json:"berth"`
	Policy *Phase `json:"policy,omitempty"`
	// P95Ratio and PolicyP95Ratio are the berth runs' p95 over the floor's.
	P95Ratio       float64 `json:"p95Ratio"`
	PolicyP95Ratio float64 `json:"policyP95Ratio,omitempty"`
	// APIServerCPURatio and PolicyAPIServerCPURatio are kube-apiserver's
	// CPU seconds in the berth runs over the floor's: per pod, as every run
	// creates the same pods.
	APIServerCPURatio       float64 `json:"apiServerCPURatio,omitempty"`
	PolicyAPIServerCPURatio float64 `json:"policyAPIServerCPURatio,omitempty"`
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	r.CPUs, r.GoVersion = runtime.NumCPU(), runtime.Version()
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// namedPhase is a run with its name in the table.
type namedPhase struct {
	name string
	p    Phase
}

// runs are the floor and the berth runs, in table order.
func (r *Report) runs() []namedPhase {
	out := []namedPhase{{"kube-scheduler alone", r.Floor}, {"berth, webhook path", r.Berth}}
	if r.Policy != nil {
		out = append(out, namedPhase{"berth, policy path", *r.Policy})
	}
	return out
}

// WriteTable prints the report for a reader.
func (r *Report) WriteTable(w io.Writer) error {
	shape := map[Shape]string{ShapePods: "pod groups", ShapeDeployments: "Deployments scaled up",
		ShapeLeaderWorkerSets: "LeaderWorkerSet replicas scaled up"}[r.Shape]
	_, err := fmt.Fprintf(w, "berth perf: burst, %d gangs as %s (%d pods, 1 GPU each) within %gs on %d nodes; kube-scheduler QPS %d\n",
		r.Gangs, shape, r.Pods, r.Window, r.Nodes, r.SchedulerQPS)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%-22s %9s %9s %9s %9s %9s %9s\n", "run", "created", "complete", "partial", "p50", "p95", "max"); err != nil {
		return err
	}
	for _, ph := range r.runs() {
		if _, err := fmt.Fprintf(w, "%-22s %8.1fs %9d %9d %8.2fs %8.2fs %8.2fs\n", ph.name,
			ph.p.CreateSpan, ph.p.Complete, ph.p.Partial, ph.p.P50, ph.p.P95, ph.p.Max); err != nil {
			return err
		}
	}
	if _, err = fmt.Fprintf(w, "berth p95 / floor p95: webhook path %.2fx, policy path %.2fx; Workloads admitted: %d; pods on records: %d\n",
		r.P95Ratio, r.PolicyP95Ratio, r.Berth.Workloads, r.Berth.Records); err != nil {
		return err
	}
	if _, err = fmt.Fprintf(w, "kube-apiserver CPU / floor's (per pod): webhook path %.2fx, policy path %.2fx\n",
		r.APIServerCPURatio, r.PolicyAPIServerCPURatio); err != nil {
		return err
	}
	for _, ph := range r.runs() {
		if _, err := fmt.Fprintf(w, "CPU seconds, %s: %s\n", ph.name, cpuLine(ph.p.CPUSeconds)); err != nil {
			return err
		}
		if ph.p.ThroughBerth {
			calls := line(ph.p.WebhookCalls, func(v float64) string { return strconv.Itoa(int(v)) })
			if _, err := fmt.Fprintf(w, "webhook calls, %s: %s\n", ph.name, calls); err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "berth's writes, %s: %s (%.2f per pod)\n", ph.name, countLine(ph.p.BerthWrites),
				float64(total(ph.p.BerthWrites))/float64(max(ph.p.Pods, 1))); err != nil {
				return err
			}
		}
	}
	for _, ph := range r.runs() {
		if s := ph.p.Stages; s != nil {
			_, err = fmt.Fprintf(w, "%s, p50 / p95: creation to Workload %.2fs / %.2fs, to admission %.2fs / %.2fs, to all bound %.2fs / %.2fs\n",
				ph.name, s.ToWorkloadP50, s.ToWorkloadP95, s.ToAdmittedP50, s.ToAdmittedP95, s.ToBoundP50, s.ToBoundP95)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// countLine lists counts by name, largest first.
func countLine(counts map[string]int) string {
	return line(counts, strconv.Itoa)
}

// total sums counts.
func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// cpuLine lists CPU seconds by component, largest first.
func cpuLine(cpu map[string]float64) string {
	return line(cpu, func(v float64) string { return fmt.Sprintf("%.1f", v) })
}

// line lists amounts by name, largest first, each formatted by format.
func line[V int | float64](amounts map[string]V, format func(V) string) string {
	names := slices.Collect(maps.Keys(amounts))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(amounts[b], amounts[a]), cmp.Compare(a, b)) })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+" "+format(amounts[n]))
	}
	return strings.Join(parts, ", ")
}
