package queue

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/scheduler"
)

// clusterQueueReport is what the queue-status tick reports of cq to the
// metrics: its status as its Active condition says, what the engine holds
// for it (st, when the engine has the queue), and its quotas.
func clusterQueueReport(cq *berthv1.ClusterQueue, active metav1.Condition, st scheduler.QueueStatus) metrics.ClusterQueueReport {
	r := metrics.ClusterQueueReport{Name: cq.Name, Cohort: cq.Spec.Cohort, Status: metrics.QueueStatusPending,
		Pending: int(st.PendingWorkloads), Inadmissible: int(st.Inadmissible), Admitted: int(st.AdmittedWorkloads), WeightedShare: st.WeightedShare, Held: st.Held}
	switch {
	case cq.DeletionTimestamp != nil:
		r.Status = metrics.QueueStatusTerminating
	case active.Status == metav1.ConditionTrue:
		r.Status = metrics.QueueStatusActive
	}
	held := map[[2]string]berthv1.ResourceUsage{}
	for _, f := range st.FlavorsUsage {
		for _, u := range f.Resources {
			held[[2]string{f.Name, string(u.Name)}] = u
		}
	}
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			for _, q := range f.Resources {
				u := held[[2]string{f.Name, string(q.Name)}]
				rr := metrics.ResourceReport{Flavor: f.Name, Resource: string(q.Name), Nominal: q.NominalQuota.AsApproximateFloat64(),
					Reservation: u.Total.AsApproximateFloat64(), Borrowed: u.Borrowed.AsApproximateFloat64()}
				used := st.AdmittedUsage[scheduler.FlavorResource{Flavor: f.Name, Resource: q.Name}]
				rr.Usage = used.AsApproximateFloat64()
				if q.BorrowingLimit != nil {
					rr.BorrowingLimit = new(q.BorrowingLimit.AsApproximateFloat64())
				}
				if q.LendingLimit != nil {
					rr.LendingLimit = new(q.LendingLimit.AsApproximateFloat64())
				}
				r.Resources = append(r.Resources, rr)
			}
		}
	}
	return r
}
