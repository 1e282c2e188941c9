package trace

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The simulator keeps every pod of a trace in memory and sums requests as
// int64 thousandths, so a trace is refused, with a message naming the cap,
// before it can take the machine's memory (a typo of 2,000,000,000 pods)
// or overflow a sum. The caps are far above any real cluster's.
const (
	// MaxJobPods is the most pods one job may have.
	MaxJobPods = 100_000
	// MaxTracePods is the most pods all jobs of a trace may have together.
	MaxTracePods = 2_000_000
	// MaxTraceJobs is the most jobs a trace may have: a million, more
	// than a month of the busiest public traces (Philly's whole log is
	// about 117,000 jobs), and each costs a Workload in berth's runs.
	MaxTraceJobs = 1_000_000
	// maxJobMilli caps one resource's request over a whole job (request ×
	// pods) in thousandths, half of what an int64 holds.
	maxJobMilli = math.MaxInt64 / 2
)

// MaxPodRequest is the most of any one resource a pod may request: 1P
// (10^15) — a petabyte of memory, a quadrillion GPUs.
var MaxPodRequest = resource.MustParse("1P")

// maxProblems caps how many problems one error reports: a trace with a
// systematic mistake (a wrong column, a unit missing everywhere) would
// otherwise bury the first, most useful lines under thousands of copies.
const maxProblems = 20

// problems collects the errors of one read or validation, up to
// maxProblems, counting the rest.
type problems struct {
	errs    []error
	dropped int
}

// add records err, or counts it once the cap is reached.
func (p *problems) add(err error) {
	if len(p.errs) >= maxProblems {
		p.dropped++
		return
	}
	p.errs = append(p.errs, err)
}

// addf records a formatted error.
func (p *problems) addf(format string, args ...any) {
	p.add(fmt.Errorf(format, args...))
}

// err joins the recorded errors, nil when there are none.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	errs := p.errs
	if p.dropped > 0 {
		errs = append(slices.Clip(errs), fmt.Errorf("... and %d more problems", p.dropped))
	}
	return errors.Join(errs...)
}

// Validate checks every job of the trace and returns all problems found
// (up to 20), each naming the job as jobs[i] and by ID. It does not
// require the jobs to be sorted: the readers and Generate sort them, and
// a trace built in code may be validated before it is.
func (t Trace) Validate() error {
	var p problems
	validateJobs(&p, t.Jobs, indexWhere)
	return p.err()
}

// tracePodsProblem reports a trace whose jobs have more pods together than
// MaxTracePods, "" when they have not. Jobs over MaxJobPods count at the
// cap, so that the sum cannot overflow.
func tracePodsProblem(jobs []Job) string {
	var total int64
	for _, j := range jobs {
		total += int64(min(max(j.Pods, 0), MaxJobPods))
	}
	if total <= MaxTracePods {
		return ""
	}
	return fmt.Sprintf("the trace has %d pods in all, more than the simulator takes (%d): split it by submit time into parts under the cap and simulate each, or shrink its gangs", total, MaxTracePods)
}

// traceJobsProblem reports a trace of more than MaxTraceJobs jobs, ""
// when it has not.
func traceJobsProblem(jobs []Job) string {
	if len(jobs) <= MaxTraceJobs {
		return ""
	}
	return fmt.Sprintf("the trace has %d jobs, more than the simulator takes (%d): split it by submit time into parts under the cap and simulate each", len(jobs), MaxTraceJobs)
}

// indexWhere names a job by its position, as in a YAML or JSON document.
func indexWhere(i int) string {
	return fmt.Sprintf("jobs[%d]", i)
}

// validateJobs adds the problems of jobs to p; where(i) names the i-th
// job's place in the input (a CSV line, a YAML index) so that the
// message says where to fix it.
func validateJobs(p *problems, jobs []Job, where func(int) string) {
	for _, msg := range []string{traceJobsProblem(jobs), tracePodsProblem(jobs)} {
		if msg != "" {
			p.addf("%s", msg)
		}
	}
	seen := make(map[string]int, len(jobs))
	for i, j := range jobs {
		at := where(i)
		if j.ID != "" {
			at += fmt.Sprintf(" (job %s)", j.ID)
		}
		for _, msg := range jobProblems(j) {
			p.addf("%s: %s", at, msg)
		}
		if j.ID == "" {
			continue
		}
		if first, dup := seen[j.ID]; dup {
			p.addf("%s: id %q is already used by %s; ids must be unique", at, j.ID, where(first))
			continue
		}
		seen[j.ID] = i
	}
}

// jobProblems lists what is wrong with one job, as messages that say
// which field to fix and what it holds.
func jobProblems(j Job) []string {
	var out []string
	if j.ID == "" {
		out = append(out, "id must not be empty")
	}
	if j.Submit < 0 {
		out = append(out, fmt.Sprintf("submit must not be negative, got %v", j.Submit))
	}
	if j.Namespace == "" {
		out = append(out, "namespace must not be empty")
	}
	if j.LocalQueue == "" {
		out = append(out, "localQueue must not be empty")
	}
	if j.Kind != Training && j.Kind != Inference {
		out = append(out, fmt.Sprintf("kind must be %q or %q, got %q", Training, Inference, j.Kind))
	}
	if j.Pods < 1 {
		out = append(out, fmt.Sprintf("pods must be at least 1, got %d", j.Pods))
	}
	if j.Pods > MaxJobPods {
		out = append(out, fmt.Sprintf("pods must be at most %d, the most the simulator takes for one job, got %d: split the job into smaller ones", MaxJobPods, j.Pods))
	}
	out = append(out, requestProblems(j.Requests, j.Pods)...)
	for k := range j.NodeSelector {
		if k == "" {
			out = append(out, "nodeSelector has an empty key")
		}
	}
	out = append(out, topologyProblems(j.Topology)...)
	if j.RunTime <= 0 {
		out = append(out, fmt.Sprintf("runTime must be positive, got %v", j.RunTime))
	}
	if j.SLO < 0 {
		out = append(out, fmt.Sprintf("slo must not be negative, got %v", j.SLO))
	}
	return out
}

// requestProblems checks per-pod requests of a job of pods pods, in
// resource-name order so that messages are stable.
func requestProblems(reqs corev1.ResourceList, pods int32) []string {
	if len(reqs) == 0 {
		return []string{"requests must name at least one resource, e.g. nvidia.com/gpu=8"}
	}
	var out []string
	for _, name := range sortedKeys(reqs) {
		if name == "" {
			out = append(out, "requests has an empty resource name")
			continue
		}
		q := reqs[name]
		switch {
		case q.Sign() < 0:
			out = append(out, fmt.Sprintf("request %s must not be negative, got %s", name, q.String()))
		case q.Cmp(MaxPodRequest) > 0:
			out = append(out, fmt.Sprintf("request %s must be at most %s per pod, got %s", name, MaxPodRequest.String(), q.String()))
		case pods > 0 && q.MilliValue() > maxJobMilli/int64(pods):
			out = append(out, fmt.Sprintf("request %s × %d pods is more than the simulator can add up: at most %.3g over a job",
				name, pods, float64(maxJobMilli)/1000))
		}
	}
	return out
}

// topologyProblems checks a topology request: both parts or neither, and
// a mode berth knows.
func topologyProblems(t Topology) []string {
	switch {
	case t.Mode == "" && t.Level == "":
		return nil
	case t.Mode == "" || t.Level == "":
		return []string{fmt.Sprintf("topology mode and level must both be set or both be empty, got mode %q and level %q", t.Mode, t.Level)}
	case t.Mode != Required && t.Mode != Preferred:
		return []string{fmt.Sprintf("topology mode must be %q or %q, got %q", Required, Preferred, t.Mode)}
	}
	return nil
}

// sortJobs orders jobs by Submit then ID, the order Trace promises;
// stable so that jobs equal in both keep their input order.
func sortJobs(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int {
		if c := cmp.Compare(a.Submit, b.Submit); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// sortedKeys returns a map's keys in order, for deterministic output.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
