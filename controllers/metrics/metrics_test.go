package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(reg); err == nil {
		t.Error("registering twice must fail, not silently double count")
	}
	m.Admission(ResultAdmitted)
	m.Admission(ResultAdmitted)
	m.Admission(ResultRolledBack)
	m.Preemption("InCohortReclamation")
	m.PendingStatusWrite()
	m.ObserveCycle(250 * time.Microsecond)
	m.ObserveAdmissionWait("team-a", PathProvisioned, 90*time.Second)
	m.ProvisioningOutcome("best-effort-atomic-scale-up.autoscaling.x-k8s.io", "Failed")
	m.AddIdle("h200", "nvidia.com/gpu", 4, 5*time.Second)
	m.AddIdle("h200", "nvidia.com/gpu", 2, 5*time.Second)
	m.NotificationBreakerOpened("webhook")
	m.NotificationBreakerOpened("webhook")
	m.NotificationBreakerClosed("webhook")

	cases := []struct {
		name string
		got  float64
		want float64
	}{
		{"admitted", testutil.ToFloat64(m.AdmissionsTotal.WithLabelValues(ResultAdmitted)), 2},
		{"rolled back", testutil.ToFloat64(m.AdmissionsTotal.WithLabelValues(ResultRolledBack)), 1},
		{"preemptions", testutil.ToFloat64(m.PreemptionsTotal.WithLabelValues("InCohortReclamation")), 1},
		{"pending writes", testutil.ToFloat64(m.PendingStatusWritesTotal), 1},
		{"provisioning failures", testutil.ToFloat64(m.ProvisioningAttemptsTotal.WithLabelValues("best-effort-atomic-scale-up.autoscaling.x-k8s.io", "Failed")), 1},
		{"idle GPU-seconds", testutil.ToFloat64(m.IdleWhileWaitingTotal.WithLabelValues("h200", "nvidia.com/gpu")), 30},
		{"breakers open", testutil.ToFloat64(m.NotificationBreakersOpen.WithLabelValues("webhook")), 1},
		{"breaker trips", testutil.ToFloat64(m.NotificationBreakerTripsTotal.WithLabelValues("webhook")), 2},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(m.CycleDuration); n != 1 {
		t.Errorf("cycle histogram series = %d, want 1", n)
	}
}
