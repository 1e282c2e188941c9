package runner

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report, indented, to path.
func (r *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// WriteTable prints the report for people.
func (r *Report) WriteTable(w io.Writer) error {
	p := &printer{w: w, out: w}
	m := r.Machine
	dirty := ""
	if m.Dirty {
		dirty = " (with uncommitted changes)"
	}
	p.f("berth perf: %s, %s mode, %d workloads; berth QPS %g burst %d, preemption %s\n",
		r.Scenario, r.Mode, r.Workloads, r.Berth.QPS, r.Berth.Burst, r.Berth.Preemption)
	p.f("machine: %d x %s, %s; checkout %.12s%s; berth from %s\n", m.CPUs, m.CPUModel, m.GoVersion, m.Commit, dirty, r.Berth.Source)
	if r.TimedOut {
		p.f("TIMED OUT: figures are partial\n")
	}
	p.f("created %d, admitted %d, finished %d", r.Created, r.Admitted, r.Finished)
	if len(r.Failures) > 0 {
		p.f(", first failure: %s", r.Failures[0])
	}
	p.f("\n\n")
	p.wall(r)
	p.classes(r)
	p.usage(r)
	p.requests(r)
	p.processes(r)
	return p.err
}

// printer writes formatted text and keeps the first error. Sections of
// columns go through a tabwriter (see table and flush).
type printer struct {
	w, out io.Writer
	err    error
}

// table starts a section of tab-separated columns.
func (p *printer) table(flags uint) { p.w = tabwriter.NewWriter(p.out, 0, 0, 2, ' ', flags) }

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func ratio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

func (p *printer) wall(r *Report) {
	f := r.Floors
	p.table(0)
	p.f("\tseconds\twall / floor\n")
	p.f("wall time\t%.1f\t\n", r.WallSeconds)
	p.f("quota floor (ideal greedy replay)\t%.1f\t%s\n", f.QuotaSeconds, ratio(r.Ratios.WallToQuota))
	p.f("write floor (%d controller writes / QPS %g)\t%.1f\t%s\n", f.ControllerWrites, r.Berth.QPS, f.WriteSeconds, ratio(r.Ratios.WallToWrite))
	if f.Calibration != nil {
		p.f("API floor (%d writes / %.0f writes/s measured)\t%.1f\t%s\n", f.APIWrites, f.Calibration.WritesPerSecond, f.APISeconds, ratio(r.Ratios.WallToAPI))
	}
	p.f("binding floor (largest)\t%.1f\t%s\n", f.BindingSeconds, ratio(r.Ratios.WallToBinding))
	p.flush()
}

// flush ends a section of columns.
func (p *printer) flush() {
	if tw, ok := p.w.(*tabwriter.Writer); ok && p.err == nil {
		p.err = tw.Flush()
	}
	p.w = p.out
	p.f("\n")
}

func (p *printer) classes(r *Report) {
	p.table(tabwriter.AlignRight)
	p.f("time to admission (s)\tcount\tmean\tp50\tp90\tp99\tmax\tfloor mean\tmean / floor\t\n")
	for _, c := range r.Classes {
		p.f("%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n", c.Name, c.Wait.Count, c.Wait.Mean, c.Wait.P50,
			c.Wait.P90, c.Wait.P99, c.Wait.Max, c.FloorMean, ratio(c.MeanToFloor))
	}
	p.flush()
}

func (p *printer) usage(r *Report) {
	u := r.Usage
	p.f("ClusterQueue usage (%s, %% of nominal quota, all queues): mean %.0f%%; by tenth of the wall time:", u.Resource, u.MeanPercent)
	for _, d := range u.Deciles {
		if d < 0 {
			p.f(" -")
			continue
		}
		p.f(" %.0f", d)
	}
	p.f("\n\n")
}

func (p *printer) requests(r *Report) {
	q := r.Requests
	p.f("berth's API requests during the run: %d writes, %.2f per admitted workload (target <= 1.2)\n", q.Writes, q.WritesPerAdmitted)
	p.f("  by method (client metrics):%s\n", counts(q.ByMethod, r.Admitted))
	if q.ByRequest != nil {
		p.f("  by request (audit log):%s\n", counts(q.ByRequest, r.Admitted))
		p.f("  conflicts %d, other errors %d\n", q.Conflicts, q.Errors)
	}
	p.f("  pending reasons written (seen by watch): %d; evictions: %d; quota violations (writes in etcd order): %d\n",
		r.PendingReasonWrites, r.Evictions, r.QuotaViolationCount)
	l := r.Runner
	p.f("  runner: %s; create lag mean %.3fs max %.3fs; finish seen after runtime: mean %.3fs max %.3fs",
		strings.TrimSpace(counts(l.RequestsByMethod, 0)), l.CreateLag.Mean, l.CreateLag.Max, l.FinishLag.Mean, l.FinishLag.Max)
	if l.FinishWrite.Count > 0 {
		p.f(" (write %.3fs + watch %.3fs)", l.FinishWrite.Mean, l.FinishSeen.Mean)
	}
	p.f("\n\n")
}

// counts renders "k n (n/per)" sorted by count, largest first.
func counts(m map[string]int, per int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		if per > 0 {
			fmt.Fprintf(&b, " %s %d (%.3f/wl),", k, m[k], float64(m[k])/float64(per))
		} else {
			fmt.Fprintf(&b, " %s %d,", k, m[k])
		}
	}
	return strings.TrimSuffix(b.String(), ",")
}

func (p *printer) processes(r *Report) {
	p.table(tabwriter.AlignRight)
	p.f("process\tCPU s (run)\tcores busy\tpeak RSS MiB\t\n")
	for _, x := range []struct {
		name string
		u    ProcUsage
	}{{"berth-controller", r.Processes.Berth}, {"kube-apiserver", r.Processes.APIServer}, {"etcd", r.Processes.Etcd}, {"runner", r.Processes.Runner}} {
		p.f("%s\t%.1f\t%.2f\t%.0f\t\n", x.name, x.u.CPUSeconds, x.u.CoresBusy, float64(x.u.PeakRSSBytes)/(1<<20))
	}
	p.flush()
	p.f("per admitted workload: kube-apiserver %.1f ms CPU; berth %.2f MiB peak RSS per 1,000\n",
		1000*r.Processes.APIServerCPUPerAdmitted, r.Processes.BerthPeakRSSPer1000/(1<<20))
}
