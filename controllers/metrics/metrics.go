// Package metrics defines berth's Prometheus metrics. Labels are bounded:
// no object names, no per-run identifiers. Register adds the collectors to
// a registry explicitly; nothing registers itself at init.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the result label of AdmissionsTotal.
const (
	ResultAdmitted   = "admitted"
	ResultRolledBack = "rolled_back"
)

// Metrics are berth's collectors.
type Metrics struct {
	// CycleDuration is how long one admission cycle of the engine took
	// (decision only, without writing the decisions).
	CycleDuration prometheus.Histogram
	// AdmissionsTotal counts admission decisions by result: admitted
	// (written) or rolled_back (the write failed and the engine forgot it).
	AdmissionsTotal *prometheus.CounterVec
	// PreemptionsTotal counts evictions written, by the engine's reason:
	// InClusterQueue, InCohortReclamation, InCohortFairSharing.
	PreemptionsTotal *prometheus.CounterVec
	// PendingStatusWritesTotal counts pending-reason writes to Workloads.
	PendingStatusWritesTotal prometheus.Counter
}

// New creates the collectors.
func New() *Metrics {
	return &Metrics{
		CycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_admission_cycle_duration_seconds",
			Help:    "Time the admission engine took to decide one cycle, without writing its decisions.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 4, 10),
		}),
		AdmissionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_admissions_total",
			Help: "Admission decisions by result: admitted (written to the Workload) or rolled_back (the write failed and the engine forgot the decision).",
		}, []string{"result"}),
		PreemptionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_preemptions_total",
			Help: "Workloads evicted to make room, by reason: InClusterQueue, InCohortReclamation, InCohortFairSharing.",
		}, []string{"reason"}),
		PendingStatusWritesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_pending_status_writes_total",
			Help: "Writes of a pending workload's reason to its status (one per change of reason at most).",
		}),
	}
}

// Register adds every collector to r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.CycleDuration, m.AdmissionsTotal, m.PreemptionsTotal, m.PendingStatusWritesTotal} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// ObserveCycle records the duration of one engine cycle.
func (m *Metrics) ObserveCycle(d time.Duration) { m.CycleDuration.Observe(d.Seconds()) }

// Admission records one admission decision's result.
func (m *Metrics) Admission(result string) { m.AdmissionsTotal.WithLabelValues(result).Inc() }

// Preemption records one eviction by reason.
func (m *Metrics) Preemption(reason string) { m.PreemptionsTotal.WithLabelValues(reason).Inc() }

// PendingStatusWrite records one pending-reason write.
func (m *Metrics) PendingStatusWrite() { m.PendingStatusWritesTotal.Inc() }
