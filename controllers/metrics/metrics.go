// Package metrics defines berth's Prometheus metrics. Labels are bounded:
// no object names, no per-run identifiers. Register adds the collectors to
// a registry explicitly; nothing registers itself at init.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics endpoint authenticates and authorizes each scrape against the
// API server (berth-controller --metrics-secure).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

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
	// AdmissionWait is the time from a Workload's creation to its gang
	// being allowed to start, by ClusterQueue and path: existing (admitted
	// on capacity that was there) or provisioned (admitted once booked
	// capacity was provisioned).
	AdmissionWait *prometheus.HistogramVec
	// ProvisioningAttemptsTotal counts the engine's decisions about
	// bookings by class and outcome: Provisioned, or how the attempt failed
	// (Failed, CapacityNotFound, NoAnswer, BookingExpired, CapacityRevoked,
	// PodsNotReady).
	ProvisioningAttemptsTotal *prometheus.CounterVec
	// IdleWhileWaitingTotal accumulates, per flavor and resource, the free
	// capacity (in units of the resource: GPUs for nvidia.com/gpu) times
	// the seconds it stayed free while a gang that needs that flavor waited
	// for capacity: GPU-seconds idle in the wrong place.
	IdleWhileWaitingTotal *prometheus.CounterVec
	// NotificationsTotal counts failure reports by sink type (slack,
	// webhook, event) and result: sent, failed (given up after retries or
	// refused) or dropped (the namespace's delivery queue was full, the
	// policy's rate was spent, or the sink's circuit breaker was open).
	NotificationsTotal *prometheus.CounterVec
	// NotificationBreakersOpen is how many sinks, by type, have their
	// circuit breaker open: they failed too often in a row, and their
	// reports are dropped until a cool-down has passed and a trial
	// succeeds.
	NotificationBreakersOpen *prometheus.GaugeVec
	// NotificationBreakerTripsTotal counts circuit breakers of sinks that
	// opened, by sink type.
	NotificationBreakerTripsTotal *prometheus.CounterVec
	// PodGate is 1 for the way queued pods are gated, as detected at
	// start: path "policy" (berth's MutatingAdmissionPolicy, inside the
	// API server) or "webhook" (berth's pod webhook), 0 for the other.
	PodGate *prometheus.GaugeVec
	// Headroom is HeadroomPolicies' headroom per domain, kept and
	// available; HeadroomTakenTotal what replicas took of it.
	Headroom           *prometheus.GaugeVec
	HeadroomTakenTotal *prometheus.CounterVec
	// Queues are the per-queue series, set on the queue-status tick.
	Queues *Queues
}

// Values of the path label of PodGate.
const (
	PodGatePolicy  = "policy"
	PodGateWebhook = "webhook"
)

// Values of the result label of NotificationsTotal.
const (
	NotificationSent    = "sent"
	NotificationFailed  = "failed"
	NotificationDropped = "dropped"
)

// Values of the path label of AdmissionWait.
const (
	PathExisting    = "existing"
	PathProvisioned = "provisioned"
)

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
		AdmissionWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_admission_wait_seconds",
			Help:    "Time from a Workload's creation until its gang may start, by ClusterQueue and path (existing capacity, or provisioned capacity).",
			Buckets: prometheus.ExponentialBuckets(0.1, 2.5, 14), // 0.1 s to about 10 h
		}, []string{"cluster_queue", "path"}),
		ProvisioningAttemptsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_provisioning_attempts_total",
			Help: "Outcomes of berth's capacity bookings, by ProvisioningRequest class and outcome (Provisioned, Failed, CapacityNotFound, NoAnswer, BookingExpired, CapacityRevoked, PodsNotReady).",
		}, []string{"class", "outcome"}),
		IdleWhileWaitingTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_idle_capacity_while_waiting_seconds_total",
			Help: "Free capacity (in units of the resource) times seconds, on schedulable nodes of a flavor, while a gang of that flavor waited for capacity: e.g. GPU-seconds idle in the wrong place.",
		}, []string{"flavor", "resource"}),
		NotificationsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_notifications_total",
			Help: "Failure reports of gangs, by sink type (slack, webhook, event) and result: sent, failed (refused, or given up after retries) or dropped (the namespace's delivery queue was full, the policy's rate was spent, or the sink's circuit breaker was open).",
		}, []string{"sink", "result"}),
		NotificationBreakersOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_notification_breakers_open",
			Help: "Notification sinks whose circuit breaker is open (their reports are dropped for a cool-down after repeated failures), by sink type (slack, webhook, event).",
		}, []string{"sink"}),
		NotificationBreakerTripsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_notification_breaker_trips_total",
			Help: "Circuit breakers of notification sinks that opened after repeated failures, by sink type (slack, webhook, event).",
		}, []string{"sink"}),
		PodGate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_pod_gate",
			Help: "1 for how queued pods are gated, as detected at start: path policy (berth's MutatingAdmissionPolicy inside the API server) or webhook (berth's pod webhook); 0 for the other.",
		}, []string{"path"}),
		Headroom: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_headroom_replicas",
			Help: "Warm headroom of a HeadroomPolicy in replicas of its workload, per topology domain and state: kept (what its sizing keeps there) or available (what fits now on the domain's Ready headroom nodes; below kept while the autoscaler restores what replicas took).",
		}, []string{"namespace", "policy", "cluster_queue", "domain", "state"}),
		HeadroomTakenTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_headroom_taken_replicas_total",
			Help: "Replicas' worth of a HeadroomPolicy's available headroom taken, per domain: each fall of the available headroom while what is kept did not fall (a replica started on it).",
		}, []string{"namespace", "policy", "cluster_queue", "domain"}),
		Queues: newQueues(),
	}
}

// Values of the state label of Headroom.
const (
	HeadroomKept      = "kept"
	HeadroomAvailable = "available"
)

// SetHeadroom records one domain's kept and available headroom of a
// policy, and what replicas took of it since the last record (taken).
func (m *Metrics) SetHeadroom(namespace, policy, clusterQueue, domain string, kept, available, taken int32) {
	m.Headroom.WithLabelValues(namespace, policy, clusterQueue, domain, HeadroomKept).Set(float64(kept))
	m.Headroom.WithLabelValues(namespace, policy, clusterQueue, domain, HeadroomAvailable).Set(float64(available))
	c := m.HeadroomTakenTotal.WithLabelValues(namespace, policy, clusterQueue, domain)
	if taken > 0 {
		c.Add(float64(taken))
	}
}

// ForgetHeadroom drops a policy's headroom series: it was deleted, or its
// domains changed and are recorded again.
func (m *Metrics) ForgetHeadroom(namespace, policy string) {
	m.Headroom.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "policy": policy})
}

// Register adds every collector to r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range append([]prometheus.Collector{m.CycleDuration, m.AdmissionsTotal, m.PreemptionsTotal, m.PendingStatusWritesTotal,
		m.AdmissionWait, m.ProvisioningAttemptsTotal, m.IdleWhileWaitingTotal, m.NotificationsTotal, m.NotificationBreakersOpen,
		m.NotificationBreakerTripsTotal, m.PodGate, m.Headroom, m.HeadroomTakenTotal}, m.Queues.collectors()...) {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// SetPodGate records the path queued pods are gated by.
func (m *Metrics) SetPodGate(path string) {
	for _, p := range []string{PodGatePolicy, PodGateWebhook} {
		v := 0.0
		if p == path {
			v = 1
		}
		m.PodGate.WithLabelValues(p).Set(v)
	}
}

// ObserveCycle records the duration of one engine cycle.
func (m *Metrics) ObserveCycle(d time.Duration) { m.CycleDuration.Observe(d.Seconds()) }

// Admission records one admission decision's result.
func (m *Metrics) Admission(result string) { m.AdmissionsTotal.WithLabelValues(result).Inc() }

// Preemption records one eviction by reason.
func (m *Metrics) Preemption(reason string) { m.PreemptionsTotal.WithLabelValues(reason).Inc() }

// PendingStatusWrite records one pending-reason write.
func (m *Metrics) PendingStatusWrite() { m.PendingStatusWritesTotal.Inc() }

// ObserveAdmissionWait records how long a workload waited, by path.
func (m *Metrics) ObserveAdmissionWait(clusterQueue, path string, d time.Duration) {
	m.AdmissionWait.WithLabelValues(clusterQueue, path).Observe(d.Seconds())
}

// ProvisioningOutcome records the outcome of one ProvisioningRequest.
func (m *Metrics) ProvisioningOutcome(class, outcome string) {
	m.ProvisioningAttemptsTotal.WithLabelValues(class, outcome).Inc()
}

// AddIdle adds amount (in units of the resource) idle for d.
func (m *Metrics) AddIdle(flavor, resource string, amount float64, d time.Duration) {
	m.IdleWhileWaitingTotal.WithLabelValues(flavor, resource).Add(amount * d.Seconds())
}

// Notification records the result of one report to a sink.
func (m *Metrics) Notification(sink, result string) {
	m.NotificationsTotal.WithLabelValues(sink, result).Inc()
}

// NotificationBreakerOpened records a sink's circuit breaker opening.
func (m *Metrics) NotificationBreakerOpened(sink string) {
	m.NotificationBreakersOpen.WithLabelValues(sink).Inc()
	m.NotificationBreakerTripsTotal.WithLabelValues(sink).Inc()
}

// NotificationBreakerClosed records a sink's circuit breaker closing (a
// trial succeeded, or its policy went away).
func (m *Metrics) NotificationBreakerClosed(sink string) {
	m.NotificationBreakersOpen.WithLabelValues(sink).Dec()
}
