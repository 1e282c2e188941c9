package sim

import (
	"slices"
	"time"

	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/cmd/internal/sim/plot"
)

// meter integrates a run's measures over simulated time. Every quantity is
// piecewise constant between events, so advancing to the next event's time
// before the event changes anything integrates it exactly.
type meter struct {
	r     *run
	last  time.Duration
	every time.Duration
	next  time.Duration

	// GPUs (whole units) of ready nodes, of bound pods, of bound pods of
	// gangs not running whole, and asked for by waiting gangs; nodes that
	// exist or are being created.
	readyGPU, boundGPU, partialGPU, waitingGPU int64
	nodes                                      int64
	// per tenant (ClusterQueue): GPUs held, and jobs not done.
	held, active map[string]int64

	// integrals, in GPU-seconds and node-seconds
	idleWhileWaiting, partial, busy, idle, nodeSeconds float64

	busySeries, idleSeries, partialSeries plot.Series
	shares                                map[string]*plot.Series
	// entitled and shareSum add up each tenant's weight's share and share
	// of the GPUs held over the shareN samples in which any were held.
	entitled, shareSum map[string]float64
	shareN             int

	scaleUps scaleUpCounts
	// evicted counts evictions of gangs that had pods; done the jobs that
	// ended (finished, or given up).
	evicted, done int
}

// scaleUpCounts sorts the nodes the autoscaler created for a job by who
// ran on them: a node another job ran on was not wasted, only not where
// its job went; a node nobody ran on was.
type scaleUpCounts struct {
	// Total is the nodes created for a job (the first pod packed on the
	// node, or the ProvisioningRequest's gang).
	Total int `json:"total"`
	// UsedByJob are those the job they were created for ran on whole.
	UsedByJob int `json:"usedByJob"`
	// UsedByOther are those another job ran on whole, not the job they
	// were created for (taken by another, or the job went elsewhere).
	UsedByOther int `json:"usedByOtherJob"`
	// NeverUsed are those no job ran on whole before they were removed or
	// the run ended; of them, HalfGang held pods of their job's gang that
	// never ran whole.
	NeverUsed int `json:"neverUsed"`
	HalfGang  int `json:"halfGang"`
}

func newMeter(r *run, every time.Duration) *meter {
	return &meter{r: r, every: every, held: map[string]int64{}, active: map[string]int64{},
		shares: map[string]*plot.Series{}, entitled: map[string]float64{}, shareSum: map[string]float64{},
		busySeries: plot.Series{Name: "busy"}, idleSeries: plot.Series{Name: "idle"}, partialSeries: plot.Series{Name: "partial"}}
}

// advance integrates up to t and takes the samples due by t.
func (m *meter) advance(t time.Duration) {
	for m.next <= t {
		m.integrate(m.next)
		m.sample(m.next)
		m.next += m.every
	}
	m.integrate(t)
}

func (m *meter) integrate(t time.Duration) {
	dt := (t - m.last).Seconds()
	if dt <= 0 {
		return
	}
	m.last = t
	idle := max(0, m.readyGPU-m.boundGPU)
	m.idle += float64(idle) * dt
	m.idleWhileWaiting += float64(min(idle, max(0, m.waitingGPU-m.partialGPU))) * dt
	m.partial += float64(m.partialGPU) * dt
	m.busy += float64(m.boundGPU-m.partialGPU) * dt
	m.nodeSeconds += float64(m.nodes) * dt
}

func (m *meter) sample(t time.Duration) {
	m.busySeries.Points = append(m.busySeries.Points, plot.Point{At: t, Value: float64(m.boundGPU - m.partialGPU)})
	m.idleSeries.Points = append(m.idleSeries.Points, plot.Point{At: t, Value: float64(max(0, m.readyGPU-m.boundGPU))})
	m.partialSeries.Points = append(m.partialSeries.Points, plot.Point{At: t, Value: float64(m.partialGPU)})
	m.sampleShares(t)
}

// sampleShares samples each tenant's share of the GPUs held and its
// weight's share among the tenants with work. Every tenant seen so far
// gets a point, 0 while it has no work, and every sample in which any GPU
// is held counts for all: so the means are over the same samples, sum to
// 1 over the tenants and are the means of the plotted series.
func (m *meter) sampleShares(t time.Duration) {
	var total int64
	var weights float64
	for cq, n := range m.active {
		total += m.held[cq]
		if n > 0 {
			weights += m.r.weight(cq)
		}
	}
	if total == 0 || weights == 0 {
		return
	}
	m.shareN++
	for _, cq := range sortedKeys(m.active) {
		s := m.shares[cq]
		if s == nil {
			s = &plot.Series{Name: cq}
			m.shares[cq] = s
		}
		share := float64(m.held[cq]) / float64(total)
		s.Points = append(s.Points, plot.Point{At: t, Value: share})
		m.shareSum[cq] += share
		if m.active[cq] > 0 {
			m.entitled[cq] += m.r.weight(cq) / weights
		}
	}
}

func (m *meter) gpusOf(p *pod) int64 { return p.requests[m.r.c.gpuIdx] / 1000 }

func (m *meter) submitted(j *job) {
	m.waitingGPU += j.gpus
	m.active[m.r.tenant(j)]++
}

func (m *meter) podBound(p *pod) {
	g := m.gpusOf(p)
	m.boundGPU += g
	if p.job.state != jobRunning {
		m.partialGPU += g
	}
	m.held[m.r.tenant(p.job)] += g
	if n := p.node; n.trigger == p.job.spec.ID {
		n.triggerBound = true
	}
}

func (m *meter) podRemoved(p *pod) {
	g := m.gpusOf(p)
	m.boundGPU -= g
	if p.job.state != jobRunning {
		m.partialGPU -= g
	}
	m.held[m.r.tenant(p.job)] -= g
}

// started moves a gang's GPUs from partial to busy, and marks the nodes
// it runs on as used by the job they were created for, or by another.
func (m *meter) started(j *job) {
	for _, p := range j.pods {
		m.partialGPU -= m.gpusOf(p)
		switch p.node.trigger {
		case "":
		case j.spec.ID:
			p.node.triggerUsed = true
		default:
			p.node.otherUsed = true
		}
	}
	m.waitingGPU -= j.gpus
}

// requeued counts an evicted gang that had pods, and a running one as
// waiting again.
func (m *meter) requeued(j *job, wasRunning, hadPods bool) {
	if wasRunning {
		m.waitingGPU += j.gpus
	}
	if hadPods {
		m.evicted++
	}
}

// finished counts a job as done.
func (m *meter) finished(j *job) {
	m.active[m.r.tenant(j)]--
	m.done++
}

func (m *meter) nodeChanged(n *node) {
	if !n.counted {
		n.counted = true
		m.nodes++
	}
	if n.ready && !n.readyCounted {
		n.readyCounted = true
		m.readyGPU += n.alloc[m.r.c.gpuIdx] / 1000
	}
}

func (m *meter) nodeRemoved(n *node) {
	m.nodes--
	if n.readyCounted {
		m.readyGPU -= n.alloc[m.r.c.gpuIdx] / 1000
	}
	m.countScaleUp(n)
}

func (m *meter) countScaleUp(n *node) {
	if n.trigger == "" {
		return
	}
	m.scaleUps.Total++
	switch {
	case n.triggerUsed:
		m.scaleUps.UsedByJob++
	case n.otherUsed:
		m.scaleUps.UsedByOther++
	default:
		m.scaleUps.NeverUsed++
		if n.triggerBound {
			m.scaleUps.HalfGang++
		}
	}
}

// result is the run's measures.
func (m *meter) result(policy string) PolicyResult {
	for _, name := range sortedKeys(m.r.c.nodes) {
		m.countScaleUp(m.r.c.nodes[name])
	}
	res := PolicyResult{Policy: policy, End: Duration(m.r.end), Jobs: len(m.r.jobs), Evictions: m.evicted, ScaleUps: m.scaleUps,
		GPUHours:  GPUHours{Busy: m.busy / 3600, Idle: m.idle / 3600, IdleWhileWaiting: m.idleWhileWaiting / 3600, Partial: m.partial / 3600},
		NodeHours: m.nodeSeconds / 3600, starts: map[string][]time.Duration{},
		Usage: plot.Usage{Policy: policy, Busy: m.busySeries, Idle: m.idleSeries, Partial: m.partialSeries}}
	for _, j := range m.r.jobs {
		if m.r.timeline {
			res.Timeline = append(res.Timeline, timesOf(j))
		}
		class := j.spec.ClassOf()
		switch {
		case j.firstStart >= 0:
			res.Started++
			res.starts[class] = append(res.starts[class], j.firstStart-j.spec.Submit)
		case j.state == jobGaveUp:
			res.GaveUp++
		default:
			res.NeverStarted++
		}
	}
	res.SLO = sloOf(m.r.jobs)
	for _, class := range sortedKeys(res.starts) {
		res.StartTimes = append(res.StartTimes, percentilesOf(class, res.starts[class]))
	}
	for _, cq := range sortedKeys(m.shares) {
		n := float64(m.shareN)
		res.Tenants = append(res.Tenants, TenantShare{ClusterQueue: cq, Weight: m.r.weight(cq),
			MeanShare: m.shareSum[cq] / n, EntitledShare: m.entitled[cq] / n})
		res.shares = append(res.shares, *m.shares[cq])
	}
	return res
}

// sloOf counts the jobs with a start-up SLO and those that started
// within it, in all and per class (sorted by class).
func sloOf(jobs []*job) SLO {
	var all SLO
	byClass := map[string]*ClassSLO{}
	for _, j := range jobs {
		if j.spec.SLO <= 0 {
			continue
		}
		class := j.spec.ClassOf()
		c := byClass[class]
		if c == nil {
			c = &ClassSLO{Class: class}
			byClass[class] = c
		}
		all.Jobs++
		c.Jobs++
		if j.firstStart >= 0 && j.firstStart-j.spec.Submit <= j.spec.SLO {
			all.Met++
			c.Met++
		}
	}
	if all.Jobs == 0 {
		return all
	}
	all.Attainment = float64(all.Met) / float64(all.Jobs)
	for _, class := range sortedKeys(byClass) {
		c := byClass[class]
		c.Attainment = float64(c.Met) / float64(c.Jobs)
		all.Classes = append(all.Classes, *c)
	}
	return all
}

// percentilesOf summarises the times to start of one class.
func percentilesOf(class string, d []time.Duration) StartTimes {
	slices.Sort(d)
	at := func(q float64) Duration { return Duration(d[min(len(d)-1, int(q*float64(len(d))))]) }
	return StartTimes{Class: class, Jobs: len(d), P50: at(0.50), P95: at(0.95), P99: at(0.99)}
}

// timesOf is j's timeline entry.
func timesOf(j *job) JobTimes {
	t := JobTimes{ID: j.spec.ID, Submit: Duration(j.spec.Submit)}
	if j.firstAdmit >= 0 {
		t.Admitted = ptr.To(Duration(j.firstAdmit))
	}
	if j.firstStart >= 0 {
		t.Started = ptr.To(Duration(j.firstStart))
	}
	return t
}
