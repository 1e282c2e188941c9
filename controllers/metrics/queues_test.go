package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func f(v float64) *float64 { return &v }

// TestQueueSeries reports a queue twice — the second time it has lost a
// flavor and its borrowing limit — counts an admission and evictions, and
// deletes it: each step leaves exactly the series it should. Of the 24
// GPUs h200 reserves, 16 are used: the rest wait on a booking.
func TestQueueSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	q := m.Queues
	q.ReportClusterQueue(ClusterQueueReport{Name: "vision", Cohort: "lab", Status: QueueStatusActive, Pending: 5, Inadmissible: 2, Admitted: 3, Held: map[string]int{"ExceedsMaxQuota": 1},
		WeightedShare: 0.25, Resources: []ResourceReport{
			{Flavor: "h200", Resource: "nvidia.com/gpu", Reservation: 24, Usage: 16, Borrowed: 8, Nominal: 16, BorrowingLimit: f(8), LendingLimit: f(4)},
			{Flavor: "a100", Resource: "nvidia.com/gpu", Nominal: 8},
		}})
	q.Admitted("vision")
	q.Evicted("vision", "Preempted")
	q.Evicted("vision", "Deactivated")
	q.ReportLocalQueue("team-vision", "train", 5, 3)

	want := `
# HELP berth_pending_workloads Workloads waiting in a ClusterQueue, by status: active (candidates in the next cycle) or inadmissible (set aside for lack of quota, or held: see berth_held_workloads).
# TYPE berth_pending_workloads gauge
berth_pending_workloads{cluster_queue="vision",status="active"} 3
berth_pending_workloads{cluster_queue="vision",status="inadmissible"} 2
# HELP berth_cluster_queue_nominal_quota A ClusterQueue's nominal quota, by flavor and resource.
# TYPE berth_cluster_queue_nominal_quota gauge
berth_cluster_queue_nominal_quota{cluster_queue="vision",cohort="lab",flavor="a100",resource="nvidia.com/gpu"} 8
berth_cluster_queue_nominal_quota{cluster_queue="vision",cohort="lab",flavor="h200",resource="nvidia.com/gpu"} 16
# HELP berth_cluster_queue_borrowing_limit A ClusterQueue's borrowing limit, by flavor and resource (no series when unlimited).
# TYPE berth_cluster_queue_borrowing_limit gauge
berth_cluster_queue_borrowing_limit{cluster_queue="vision",cohort="lab",flavor="h200",resource="nvidia.com/gpu"} 8
# HELP berth_cluster_queue_status 1 for a ClusterQueue's status (pending: it cannot admit, e.g. a flavor is missing or it is stopped; active; terminating), 0 for the others.
# TYPE berth_cluster_queue_status gauge
berth_cluster_queue_status{cluster_queue="vision",status="active"} 1
berth_cluster_queue_status{cluster_queue="vision",status="pending"} 0
berth_cluster_queue_status{cluster_queue="vision",status="terminating"} 0
# HELP berth_evicted_workloads_total Evictions written, by ClusterQueue and reason (Preempted, BookingFailed, PodsNotReady, ClusterQueueStopped, Deactivated, ...).
# TYPE berth_evicted_workloads_total counter
berth_evicted_workloads_total{cluster_queue="vision",reason="Deactivated"} 1
berth_evicted_workloads_total{cluster_queue="vision",reason="Preempted"} 1
# HELP berth_cluster_queue_resource_reservation Quota a ClusterQueue's workloads hold, by flavor and resource, in units of the resource.
# TYPE berth_cluster_queue_resource_reservation gauge
berth_cluster_queue_resource_reservation{cluster_queue="vision",cohort="lab",flavor="a100",resource="nvidia.com/gpu"} 0
berth_cluster_queue_resource_reservation{cluster_queue="vision",cohort="lab",flavor="h200",resource="nvidia.com/gpu"} 24
# HELP berth_cluster_queue_resource_usage Quota of a ClusterQueue held by admitted workloads, not those still booking capacity, by flavor and resource, in units of the resource.
# TYPE berth_cluster_queue_resource_usage gauge
berth_cluster_queue_resource_usage{cluster_queue="vision",cohort="lab",flavor="a100",resource="nvidia.com/gpu"} 0
berth_cluster_queue_resource_usage{cluster_queue="vision",cohort="lab",flavor="h200",resource="nvidia.com/gpu"} 16
`
	names := []string{"berth_pending_workloads", "berth_cluster_queue_nominal_quota", "berth_cluster_queue_borrowing_limit",
		"berth_cluster_queue_status", "berth_evicted_workloads_total", "berth_cluster_queue_resource_reservation", "berth_cluster_queue_resource_usage"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	cases := []struct {
		name      string
		got, want float64
	}{
		{"borrowed", testutil.ToFloat64(q.ResourceBorrowed.WithLabelValues("lab", "vision", "h200", "nvidia.com/gpu")), 8},
		{"lending limit", testutil.ToFloat64(q.LendingLimit.WithLabelValues("lab", "vision", "h200", "nvidia.com/gpu")), 4},
		{"admitted", testutil.ToFloat64(q.AdmittedActiveWorkloads.WithLabelValues("vision")), 3},
		{"held", testutil.ToFloat64(q.HeldWorkloads.WithLabelValues("vision", "ExceedsMaxQuota")), 1},
		{"admissions", testutil.ToFloat64(q.AdmittedWorkloadsTotal.WithLabelValues("vision")), 1},
		{"weighted share", testutil.ToFloat64(q.WeightedShare.WithLabelValues("vision", "lab")), 0.25},
		{"local queue pending", testutil.ToFloat64(q.LocalQueuePendingWorkloads.WithLabelValues("train", "team-vision")), 5},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}

	// Reported again without a100 and without the borrowing limit, and
	// stopped: the old series go.
	q.ReportClusterQueue(ClusterQueueReport{Name: "vision", Cohort: "lab", Status: QueueStatusPending, Resources: []ResourceReport{
		{Flavor: "h200", Resource: "nvidia.com/gpu", Nominal: 16}}})
	for name, c := range map[string]prometheus.Collector{"held": q.HeldWorkloads, "nominal quota": q.NominalQuota, "usage": q.ResourceUsage,
		"borrowing limit": q.BorrowingLimit, "lending limit": q.LendingLimit} {
		if n, want := testutil.CollectAndCount(c), map[string]int{"nominal quota": 1, "usage": 1}[name]; n != want {
			t.Errorf("%s: %d series after the flavor and the limits went, want %d", name, n, want)
		}
	}
	if v := testutil.ToFloat64(q.ClusterQueueStatus.WithLabelValues("vision", QueueStatusPending)); v != 1 {
		t.Errorf("pending status = %v, want 1", v)
	}

	q.ForgetClusterQueue("vision")
	q.ForgetLocalQueue("team-vision", "train")
	for _, c := range q.collectors() {
		if n := testutil.CollectAndCount(c); n != 0 {
			t.Errorf("%d series left after the queues were deleted", n)
		}
	}
}
