package runner

import (
	"os"
	"strings"
	"time"

	"github.com/berth-dev/berth/test/perf/procstat"
	"github.com/berth-dev/berth/test/perf/scenario"
)

// maxQueueSeries is the most ClusterQueues whose usage samples a report
// keeps one by one; beyond it, it keeps them per cohort.
const maxQueueSeries = 64

// buildReport turns what a run measured into its report.
func buildReport(o *Options, replay scenario.ReplayResult, cal *Calibration, m *measurement) *Report {
	s, t := o.Scenario, m.tracker
	r := &Report{
		Scenario: s.Name, Description: s.Description, Mode: o.Mode, Started: m.t0,
		Command: strings.Join(os.Args, " "), Machine: machine(),
		Berth:     Berth{Source: berthSource(o), QPS: o.QPS, Burst: o.Burst, Preemption: o.Preemption, Args: m.berthArgs},
		Workloads: len(t.wls), TimedOut: m.timedOut,
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	var createLag, finishLag, finishWrite, finishSeen []time.Duration
	for i := range t.recs {
		rec := &t.recs[i]
		if rec.err != nil && len(r.Failures) < 10 {
			r.Failures = append(r.Failures, rec.err.Error())
		}
		if !rec.created.IsZero() {
			r.Created++
			createLag = append(createLag, rec.createLag)
		}
		if !rec.firstAdmitted.IsZero() {
			r.Admitted++
		}
		if !rec.finished.IsZero() {
			r.Finished++
			finishLag = append(finishLag, rec.finishLag)
			if !rec.finishWritten.IsZero() {
				finishWrite = append(finishWrite, rec.finishWritten.Sub(rec.due))
				finishSeen = append(finishSeen, rec.finished.Sub(rec.finishWritten))
			}
			if rec.finished.After(last) {
				last = rec.finished
			}
		}
		r.Evictions += rec.evictions
		r.PendingReasonWrites += rec.reasonChanges
	}
	if m.timedOut || last.IsZero() {
		last = m.after.at
	}
	r.WallSeconds = last.Sub(m.t0).Seconds()
	r.Classes = classReports(s, t, replay)
	r.Floors = floors(o, replay, cal)
	r.Ratios = ratios(r.WallSeconds, r.Floors)
	r.Usage = usage(t, o.SampleInterval, r.WallSeconds)
	r.Requests = requests(m, r.Admitted)
	r.Processes = processes(m, r.Admitted)
	r.Runner = LoadStats{
		CreateLag: toSeconds(scenario.Summarize(createLag)), FinishLag: toSeconds(scenario.Summarize(finishLag)),
		FinishWrite: toSeconds(scenario.Summarize(finishWrite)), FinishSeen: toSeconds(scenario.Summarize(finishSeen)),
		RequestsByMethod: diff(m.after.requests, m.before.requests),
	}
	violations, err := t.quotaViolations()
	if err != nil {
		violations = []string{err.Error()}
	}
	r.QuotaViolationCount = len(violations)
	r.QuotaViolations = violations[:min(len(violations), 10)]
	return r
}

// berthSource says which berth-controller ran.
func berthSource(o *Options) string {
	switch {
	case o.BerthBinary != "":
		return "binary " + o.BerthBinary
	case o.BerthRevision != "":
		return "revision " + gitOutput("rev-parse", o.BerthRevision)
	default:
		return "working tree"
	}
}

// classReports summarises the time to admission per class. The caller
// holds t.mu.
func classReports(s *scenario.Scenario, t *tracker, replay scenario.ReplayResult) []ClassReport {
	waits := make([][]time.Duration, len(s.Classes))
	counts := make([]int, len(s.Classes))
	for i, w := range t.wls {
		counts[w.Class]++
		if rec := &t.recs[i]; !rec.firstAdmitted.IsZero() {
			waits[w.Class] = append(waits[w.Class], rec.firstAdmitted.Sub(rec.created))
		}
	}
	out := make([]ClassReport, len(s.Classes))
	for ci, c := range s.Classes {
		cr := ClassReport{Name: c.Name, Workloads: counts[ci], Wait: toSeconds(scenario.Summarize(waits[ci])),
			FloorMean: replay.Waits[ci].Mean.Seconds()}
		if cr.FloorMean > 0 {
			cr.MeanToFloor = cr.Wait.Mean / cr.FloorMean
		}
		out[ci] = cr
	}
	return out
}

// floors computes the scenario's floors for this run's settings.
func floors(o *Options, replay scenario.ReplayResult, cal *Calibration) Floors {
	n := o.Scenario.WorkloadCount()
	f := Floors{QuotaSeconds: replay.Makespan.Seconds(), QuotaWaits: map[string]Seconds{}, Calibration: cal}
	for ci, c := range o.Scenario.Classes {
		f.QuotaWaits[c.Name] = toSeconds(replay.Waits[ci])
	}
	// Workloads: an admission patch each. Jobs: berth also creates the
	// Workload and starts (updates) the Job.
	f.ControllerWrites = n
	if o.Mode == ModeJobs {
		f.ControllerWrites = 3 * n
	}
	f.WriteSeconds = float64(f.ControllerWrites) / o.QPS
	// The runner creates and finishes (or deletes) each one.
	f.APIWrites = f.ControllerWrites + 2*n
	if cal != nil && cal.WritesPerSecond > 0 {
		f.APISeconds = float64(f.APIWrites) / cal.WritesPerSecond
	}
	f.BindingSeconds = max(f.QuotaSeconds, f.WriteSeconds, f.APISeconds)
	return f
}

func ratios(wall float64, f Floors) Ratios {
	div := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	return Ratios{WallToQuota: div(wall, f.QuotaSeconds), WallToWrite: div(wall, f.WriteSeconds),
		WallToAPI: div(wall, f.APISeconds), WallToBinding: div(wall, f.BindingSeconds)}
}

// usage summarises the usage samples taken during the wall time. The
// caller holds t.mu.
func usage(t *tracker, interval time.Duration, wall float64) Usage {
	u := Usage{Resource: string(t.s.Groups[0].Quota[0].Resource), IntervalSeconds: interval.Seconds()}
	var samples []usageSample
	for _, s := range t.samples {
		if s.at.Seconds() <= wall {
			samples = append(samples, s)
		}
	}
	var totalNominal float64
	for i := range t.cqs {
		totalNominal += float64(t.limits[i].nominal[t.primary[i]])
	}
	decileSum, decileN := make([]float64, 10), make([]int, 10)
	for _, s := range samples {
		var used float64
		for i, f := range s.perCQ {
			used += f * float64(t.limits[i].nominal[t.primary[i]])
		}
		pct := 100 * used / totalNominal
		u.Total = append(u.Total, pct)
		u.MeanPercent += pct / float64(len(samples))
		d := min(int(10*s.at.Seconds()/wall), 9)
		decileSum[d] += pct
		decileN[d]++
	}
	for d := range decileSum {
		if decileN[d] == 0 {
			decileSum[d] = -1 // no sample in this tenth
			continue
		}
		decileSum[d] /= float64(decileN[d])
	}
	u.Deciles = decileSum
	u.ClusterQueues = queueUsage(t, samples, len(t.cqs) <= maxQueueSeries)
	if len(t.cqs) > maxQueueSeries {
		u.Cohorts = cohortUsage(t, samples)
	}
	return u
}

func queueUsage(t *tracker, samples []usageSample, keepSamples bool) []QueueUsage {
	out := make([]QueueUsage, len(t.cqs))
	for i, cq := range t.cqs {
		q := QueueUsage{Name: cq.Name}
		for _, s := range samples {
			pct := 100 * s.perCQ[i]
			q.MeanPercent += pct / float64(len(samples))
			q.PeakPercent = max(q.PeakPercent, pct)
			if keepSamples {
				q.Samples = append(q.Samples, pct)
			}
		}
		out[i] = q
	}
	return out
}

func cohortUsage(t *tracker, samples []usageSample) []QueueUsage {
	var out []QueueUsage
	for _, cq := range t.cqs {
		if len(out) > 0 && out[len(out)-1].Name == cq.Cohort {
			continue
		}
		members := t.cohorts[cq.Cohort]
		q := QueueUsage{Name: cq.Cohort}
		for _, s := range samples {
			var used, nominal float64
			for _, m := range members {
				n := float64(t.limits[m].nominal[t.primary[m]])
				used += s.perCQ[m] * n
				nominal += n
			}
			pct := 100 * used / nominal
			q.Samples = append(q.Samples, pct)
			q.MeanPercent += pct / float64(len(samples))
			q.PeakPercent = max(q.PeakPercent, pct)
		}
		out = append(out, q)
	}
	return out
}

// requests counts berth's requests during the run.
func requests(m *measurement, admitted int) Requests {
	zero := map[string]int{}
	r := Requests{
		ByMethod:      diff(requestsByMethod(m.after.metrics), requestsByMethod(m.before.metrics)),
		SetupByMethod: diff(requestsByMethod(m.before.metrics), zero),
	}
	if m.audit != nil {
		r.ByRequest, r.Conflicts, r.Errors = m.audit.ByRequest, m.audit.Conflicts, m.audit.Errors
		for what, n := range m.audit.ByRequest {
			verb, _, _ := strings.Cut(what, " ")
			if isWrite(verb) {
				r.Writes += n
			}
		}
	} else {
		for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			r.Writes += r.ByMethod[method]
		}
	}
	if admitted > 0 {
		r.WritesPerAdmitted = float64(r.Writes) / float64(admitted)
	}
	return r
}

// processes computes each process's CPU time during the run, and what the
// API server and berth spent per admitted workload.
func processes(m *measurement, admitted int) Processes {
	secs := m.after.at.Sub(m.t0).Seconds()
	use := func(before, after procstat.Sample) ProcUsage {
		cpu := after.CPUSeconds - before.CPUSeconds
		u := ProcUsage{CPUSeconds: cpu, PeakRSSBytes: after.PeakRSSBytes}
		if secs > 0 {
			u.CoresBusy = cpu / secs
		}
		return u
	}
	p := Processes{
		Berth:     use(m.before.berth, m.after.berth),
		APIServer: use(m.before.plane["kube-apiserver"], m.after.plane["kube-apiserver"]),
		Etcd:      use(m.before.plane["etcd"], m.after.plane["etcd"]),
		Runner:    use(m.before.runner, m.after.runner),
	}
	if admitted > 0 {
		p.APIServerCPUPerAdmitted = p.APIServer.CPUSeconds / float64(admitted)
		p.BerthPeakRSSPer1000 = float64(p.Berth.PeakRSSBytes) * 1000 / float64(admitted)
	}
	return p
}
