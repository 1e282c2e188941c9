package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Values of the status label of PendingWorkloads.
const (
	// PendingActive workloads are candidates in the next admission cycle.
	PendingActive = "active"
	// PendingInadmissible workloads did not fit for lack of quota and wait
	// until quota in their queue or cohort is released, or can never be
	// admitted as they are (HeldWorkloads).
	PendingInadmissible = "inadmissible"
)

// Values of the status label of ClusterQueueStatus.
const (
	QueueStatusPending     = "pending"
	QueueStatusActive      = "active"
	QueueStatusTerminating = "terminating"
)

// queueStatuses are the values of ClusterQueueStatus's status label; one
// series per value, the queue's own set to 1.
var queueStatuses = [...]string{QueueStatusPending, QueueStatusActive, QueueStatusTerminating}

// Queues are the per-queue series. Their names and labels are Kueue's
// with the berth_ prefix, so that a Kueue user's queries port by renaming
// it. Labels are bounded by the number of queues, flavors and resources.
type Queues struct {
	// PendingWorkloads by ClusterQueue and status (active, inadmissible).
	PendingWorkloads *prometheus.GaugeVec
	// HeldWorkloads are the pending workloads that cannot be admitted as
	// they are, by ClusterQueue and reason (ExceedsMaxQuota,
	// ExceedsDomainCapacity, UnsupportedResource, UnknownTopologyLevel,
	// FlavorNotFound): someone must change the queue, the cluster or the
	// job.
	HeldWorkloads *prometheus.GaugeVec
	// AdmittedActiveWorkloads holding quota, by ClusterQueue.
	AdmittedActiveWorkloads *prometheus.GaugeVec
	// AdmittedWorkloadsTotal counts admissions written, by ClusterQueue.
	AdmittedWorkloadsTotal *prometheus.CounterVec
	// EvictedWorkloadsTotal counts evictions written by the scheduler, the
	// queues and the workload reconciler (a deactivated Workload), by
	// ClusterQueue and reason.
	EvictedWorkloadsTotal *prometheus.CounterVec
	// ResourceReservation is the quota held, and ResourceBorrowed the part
	// of it above the nominal quota, by cohort, ClusterQueue, flavor and
	// resource, in units of the resource.
	ResourceReservation *prometheus.GaugeVec
	ResourceBorrowed    *prometheus.GaugeVec
	// ResourceUsage is the part of ResourceReservation held by admitted
	// workloads, not by those still booking capacity: Kueue's pair, so
	// that reservation minus usage is the quota waiting on bookings.
	ResourceUsage *prometheus.GaugeVec
	// NominalQuota, BorrowingLimit and LendingLimit are the queue's spec;
	// an unset limit has no series.
	NominalQuota   *prometheus.GaugeVec
	BorrowingLimit *prometheus.GaugeVec
	LendingLimit   *prometheus.GaugeVec
	// WeightedShare is the queue's share of what it borrows from its
	// cohort divided by its weight (0 when it borrows nothing).
	WeightedShare *prometheus.GaugeVec
	// ClusterQueueStatus is 1 for the queue's status and 0 for the others.
	ClusterQueueStatus *prometheus.GaugeVec
	// LocalQueuePendingWorkloads and LocalQueueAdmittedActiveWorkloads are
	// the LocalQueue series, reported only when enabled
	// (--local-queue-metrics): their labels grow with the namespaces.
	LocalQueuePendingWorkloads        *prometheus.GaugeVec
	LocalQueueAdmittedActiveWorkloads *prometheus.GaugeVec
}

func newQueues() *Queues {
	resourceLabels := []string{"cohort", "cluster_queue", "flavor", "resource"}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	return &Queues{
		PendingWorkloads: gauge("berth_pending_workloads",
			"Workloads waiting in a ClusterQueue, by status: active (candidates in the next cycle) or inadmissible (set aside for lack of quota, or held: see berth_held_workloads).",
			"cluster_queue", "status"),
		HeldWorkloads: gauge("berth_held_workloads",
			"Pending workloads that can never be admitted as they are, by ClusterQueue and reason: the queue, the cluster or the job must change.",
			"cluster_queue", "reason"),
		AdmittedActiveWorkloads: gauge("berth_admitted_active_workloads",
			"Workloads holding a ClusterQueue's quota, admitted or booking capacity.", "cluster_queue"),
		AdmittedWorkloadsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_admitted_workloads_total",
			Help: "Admissions written, by ClusterQueue."}, []string{"cluster_queue"}),
		EvictedWorkloadsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_evicted_workloads_total",
			Help: "Evictions written, by ClusterQueue and reason (Preempted, BookingFailed, PodsNotReady, ClusterQueueStopped, Deactivated, ...)."},
			[]string{"cluster_queue", "reason"}),
		ResourceReservation: gauge("berth_cluster_queue_resource_reservation",
			"Quota a ClusterQueue's workloads hold, by flavor and resource, in units of the resource.", resourceLabels...),
		ResourceUsage: gauge("berth_cluster_queue_resource_usage",
			"Quota of a ClusterQueue held by admitted workloads, not those still booking capacity, by flavor and resource, in units of the resource.", resourceLabels...),
		ResourceBorrowed: gauge("berth_cluster_queue_resource_borrowed",
			"Part of the quota a ClusterQueue holds above its nominal quota, by flavor and resource.", resourceLabels...),
		NominalQuota: gauge("berth_cluster_queue_nominal_quota",
			"A ClusterQueue's nominal quota, by flavor and resource.", resourceLabels...),
		BorrowingLimit: gauge("berth_cluster_queue_borrowing_limit",
			"A ClusterQueue's borrowing limit, by flavor and resource (no series when unlimited).", resourceLabels...),
		LendingLimit: gauge("berth_cluster_queue_lending_limit",
			"A ClusterQueue's lending limit, by flavor and resource (no series when unlimited).", resourceLabels...),
		WeightedShare: gauge("berth_cluster_queue_weighted_share",
			"A ClusterQueue's dominant share of what it borrows from its cohort, divided by its fair-sharing weight; 0 when it borrows nothing.",
			"cluster_queue", "cohort"),
		ClusterQueueStatus: gauge("berth_cluster_queue_status",
			"1 for a ClusterQueue's status (pending: it cannot admit, e.g. a flavor is missing or it is stopped; active; terminating), 0 for the others.",
			"cluster_queue", "status"),
		LocalQueuePendingWorkloads: gauge("berth_local_queue_pending_workloads",
			"Workloads waiting in a LocalQueue (with --local-queue-metrics).", "name", "namespace"),
		LocalQueueAdmittedActiveWorkloads: gauge("berth_local_queue_admitted_active_workloads",
			"Workloads of a LocalQueue holding quota (with --local-queue-metrics).", "name", "namespace"),
	}
}

func (q *Queues) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.PendingWorkloads, q.HeldWorkloads, q.AdmittedActiveWorkloads, q.AdmittedWorkloadsTotal, q.EvictedWorkloadsTotal,
		q.ResourceReservation, q.ResourceUsage, q.ResourceBorrowed, q.NominalQuota, q.BorrowingLimit, q.LendingLimit, q.WeightedShare,
		q.ClusterQueueStatus, q.LocalQueuePendingWorkloads, q.LocalQueueAdmittedActiveWorkloads}
}

// ClusterQueueReport is what the queue-status tick knows of one
// ClusterQueue.
type ClusterQueueReport struct {
	Name, Cohort string
	// Status is QueueStatusPending, QueueStatusActive or
	// QueueStatusTerminating.
	Status string
	// Pending workloads, Inadmissible of them; Admitted hold quota.
	Pending, Inadmissible, Admitted int
	// Held counts, by reason, the pending workloads that can never be
	// admitted as they are.
	Held          map[string]int
	WeightedShare float64
	Resources     []ResourceReport
}

// ResourceReport is one flavor and resource of a ClusterQueue, in units of
// the resource.
type ResourceReport struct {
	Flavor, Resource      string
	Reservation, Borrowed float64
	// Usage is the part of Reservation held by admitted workloads, not by
	// those still booking capacity.
	Usage   float64
	Nominal float64
	// BorrowingLimit and LendingLimit are nil when unset.
	BorrowingLimit, LendingLimit *float64
}

// ReportClusterQueue sets the queue's series to r. Series of flavors and
// resources the queue no longer has are removed.
func (q *Queues) ReportClusterQueue(r ClusterQueueReport) {
	q.forgetResources(r.Name)
	q.PendingWorkloads.WithLabelValues(r.Name, PendingActive).Set(float64(r.Pending - r.Inadmissible))
	q.PendingWorkloads.WithLabelValues(r.Name, PendingInadmissible).Set(float64(r.Inadmissible))
	q.AdmittedActiveWorkloads.WithLabelValues(r.Name).Set(float64(r.Admitted))
	q.HeldWorkloads.DeletePartialMatch(prometheus.Labels{"cluster_queue": r.Name})
	for reason, n := range r.Held {
		q.HeldWorkloads.WithLabelValues(r.Name, reason).Set(float64(n))
	}
	q.WeightedShare.DeletePartialMatch(prometheus.Labels{"cluster_queue": r.Name})
	q.WeightedShare.WithLabelValues(r.Name, r.Cohort).Set(r.WeightedShare)
	for _, s := range queueStatuses {
		v := 0.0
		if s == r.Status {
			v = 1
		}
		q.ClusterQueueStatus.WithLabelValues(r.Name, s).Set(v)
	}
	for _, res := range r.Resources {
		labels := []string{r.Cohort, r.Name, res.Flavor, res.Resource}
		q.ResourceReservation.WithLabelValues(labels...).Set(res.Reservation)
		q.ResourceUsage.WithLabelValues(labels...).Set(res.Usage)
		q.ResourceBorrowed.WithLabelValues(labels...).Set(res.Borrowed)
		q.NominalQuota.WithLabelValues(labels...).Set(res.Nominal)
		if res.BorrowingLimit != nil {
			q.BorrowingLimit.WithLabelValues(labels...).Set(*res.BorrowingLimit)
		}
		if res.LendingLimit != nil {
			q.LendingLimit.WithLabelValues(labels...).Set(*res.LendingLimit)
		}
	}
}

func (q *Queues) forgetResources(name string) {
	byQueue := prometheus.Labels{"cluster_queue": name}
	for _, g := range []*prometheus.GaugeVec{q.ResourceReservation, q.ResourceUsage, q.ResourceBorrowed, q.NominalQuota, q.BorrowingLimit, q.LendingLimit} {
		g.DeletePartialMatch(byQueue)
	}
}

// ForgetClusterQueue removes a deleted ClusterQueue's series, its
// counters too: a queue created again under the name starts from zero.
func (q *Queues) ForgetClusterQueue(name string) {
	q.forgetResources(name)
	byQueue := prometheus.Labels{"cluster_queue": name}
	for _, g := range []*prometheus.GaugeVec{q.PendingWorkloads, q.HeldWorkloads, q.AdmittedActiveWorkloads, q.WeightedShare, q.ClusterQueueStatus} {
		g.DeletePartialMatch(byQueue)
	}
	q.AdmittedWorkloadsTotal.DeletePartialMatch(byQueue)
	q.EvictedWorkloadsTotal.DeletePartialMatch(byQueue)
}

// Admitted counts one admission written for clusterQueue.
func (q *Queues) Admitted(clusterQueue string) {
	q.AdmittedWorkloadsTotal.WithLabelValues(clusterQueue).Inc()
}

// Evicted counts one eviction written for a workload of clusterQueue.
func (q *Queues) Evicted(clusterQueue, reason string) {
	q.EvictedWorkloadsTotal.WithLabelValues(clusterQueue, reason).Inc()
}

// ReportLocalQueue sets a LocalQueue's series.
func (q *Queues) ReportLocalQueue(namespace, name string, pending, admitted int) {
	q.LocalQueuePendingWorkloads.WithLabelValues(name, namespace).Set(float64(pending))
	q.LocalQueueAdmittedActiveWorkloads.WithLabelValues(name, namespace).Set(float64(admitted))
}

// ForgetLocalQueue removes a deleted LocalQueue's series.
func (q *Queues) ForgetLocalQueue(namespace, name string) {
	l := prometheus.Labels{"name": name, "namespace": namespace}
	q.LocalQueuePendingWorkloads.DeletePartialMatch(l)
	q.LocalQueueAdmittedActiveWorkloads.DeletePartialMatch(l)
}
