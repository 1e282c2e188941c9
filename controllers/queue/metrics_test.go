package queue

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/scheduler"
)

func TestClusterQueueReport(t *testing.T) {
	limit := resource.MustParse("8")
	cq := func(deleting bool) *berthv1.ClusterQueue {
		q := &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "vision"}, Spec: berthv1.ClusterQueueSpec{Cohort: "lab",
			ResourceGroups: []berthv1.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"}, Flavors: []berthv1.FlavorQuotas{
				{Name: "h200", Resources: []berthv1.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("16"), BorrowingLimit: &limit}}},
				{Name: "a100", Resources: []berthv1.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("4")}}},
			}}}}}
		if deleting {
			q.DeletionTimestamp = &metav1.Time{}
		}
		return q
	}
	st := scheduler.QueueStatus{PendingWorkloads: 4, Inadmissible: 1, AdmittedWorkloads: 2, WeightedShare: 0.5,
		FlavorsUsage: []berthv1.FlavorUsage{{Name: "h200", Resources: []berthv1.ResourceUsage{
			{Name: "nvidia.com/gpu", Total: resource.MustParse("20"), Borrowed: resource.MustParse("4")}}}},
		AdmittedUsage: map[scheduler.FlavorResource]resource.Quantity{{Flavor: "h200", Resource: "nvidia.com/gpu"}: resource.MustParse("12")}}
	cases := []struct {
		name     string
		deleting bool
		active   metav1.ConditionStatus
		want     string
	}{
		{"active", false, metav1.ConditionTrue, metrics.QueueStatusActive},
		{"cannot admit", false, metav1.ConditionFalse, metrics.QueueStatusPending},
		{"being deleted", true, metav1.ConditionTrue, metrics.QueueStatusTerminating},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := clusterQueueReport(cq(tc.deleting), metav1.Condition{Status: tc.active}, st)
			if r.Status != tc.want || r.Cohort != "lab" || r.Pending != 4 || r.Inadmissible != 1 || r.Admitted != 2 || r.WeightedShare != 0.5 {
				t.Errorf("report %+v, want status %s and the engine's counts", r, tc.want)
			}
			if len(r.Resources) != 2 {
				t.Fatalf("resources %+v, want h200 and a100", r.Resources)
			}
			h, a := r.Resources[0], r.Resources[1]
			if h.Flavor != "h200" || h.Nominal != 16 || h.Reservation != 20 || h.Usage != 12 || h.Borrowed != 4 || h.BorrowingLimit == nil || *h.BorrowingLimit != 8 || h.LendingLimit != nil {
				t.Errorf("h200: %+v", h)
			}
			if a.Flavor != "a100" || a.Nominal != 4 || a.Reservation != 0 || a.Usage != 0 || a.BorrowingLimit != nil {
				t.Errorf("a100 (nothing held, no limits): %+v", a)
			}
		})
	}
}
