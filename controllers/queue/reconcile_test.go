package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/scheduler"
	"github.com/berth-dev/berth/controllers/workload"
)

// interval is the status interval of every case.
const interval = 5 * time.Second

// engine stands in for the scheduler.
type engine struct {
	upsertErr error
	status    scheduler.QueueStatus
	known     bool
	counts    scheduler.LocalQueueCounts
	syncErr   error

	upserted [][]string                     // the missing flavors of each upsert
	labels   []map[string]map[string]string // the flavors' node labels of each upsert
	policies []berthv1.StopPolicy           // the stopPolicy of each upsert
	synced   []string                       // the workloads fed
	deleted  []string
	resynced []string // the queues whose replicas without a Workload were fed again
}

func (e *engine) ResyncRecords(_ context.Context, namespace, queue string) error {
	e.resynced = append(e.resynced, namespace+"/"+queue)
	return nil
}

func (e *engine) UpsertClusterQueue(cq *berthv1.ClusterQueue, flavors lifecycle.QueueFlavors, _ bool) error {
	e.upserted = append(e.upserted, flavors.Missing)
	e.labels = append(e.labels, flavors.NodeLabels)
	e.policies = append(e.policies, cq.Spec.StopPolicy)
	return e.upsertErr
}

func (e *engine) Sync(_ context.Context, wl *berthv1.Workload) error {
	e.synced = append(e.synced, wl.Name)
	return e.syncErr
}

func (e *engine) DeleteClusterQueue(name string) { e.deleted = append(e.deleted, name) }

func (e *engine) ClusterQueueStatus(string) (scheduler.QueueStatus, bool) { return e.status, e.known }

func (e *engine) LocalQueueCounts(string, string) scheduler.LocalQueueCounts { return e.counts }

// series records what the reconcilers told the metrics.
type series struct {
	reports   []metrics.ClusterQueueReport
	lqReports []string
	forgotten []string
}

func (s *series) ReportClusterQueue(r metrics.ClusterQueueReport) { s.reports = append(s.reports, r) }
func (s *series) ForgetClusterQueue(name string)                  { s.forgotten = append(s.forgotten, name) }
func (s *series) ReportLocalQueue(ns, name string, _, _ int) {
	s.lqReports = append(s.lqReports, ns+"/"+name)
}
func (s *series) ForgetLocalQueue(ns, name string) { s.forgotten = append(s.forgotten, ns+"/"+name) }

// api builds the fake API with the indexes the workload reconciler
// registers, which the drains list by.
func api(t *testing.T, fail []fakeapi.Failure, objs ...client.Object) (base, c client.WithWatch) {
	t.Helper()
	b, err := fakeapi.Builder(objs...)
	if err != nil {
		t.Fatal(err)
	}
	base = b.WithIndex(&berthv1.Workload{}, workload.QueueNameIndex, func(o client.Object) []string {
		return []string{o.(*berthv1.Workload).Spec.QueueName}
	}).WithIndex(&berthv1.Workload{}, workload.AdmittedInIndex, func(o client.Object) []string {
		if a := o.(*berthv1.Workload).Status.Admission; a != nil {
			return []string{a.ClusterQueue}
		}
		return nil
	}).Build()
	return base, fakeapi.Failing(base, fail...)
}

func clusterQueue(opts ...func(*berthv1.ClusterQueue)) *berthv1.ClusterQueue {
	cq := &berthv1.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "cq", Generation: 3},
		Spec: berthv1.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []berthv1.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
				Flavors:          []berthv1.FlavorQuotas{{Name: "h200"}, {Name: "a100"}},
			}},
		},
	}
	for _, o := range opts {
		o(cq)
	}
	return cq
}

func stopped(p berthv1.StopPolicy) func(*berthv1.ClusterQueue) {
	return func(cq *berthv1.ClusterQueue) { cq.Spec.StopPolicy = p }
}

func flavorObj(name string) *berthv1.ResourceFlavor {
	return &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// queuedWorkload is a workload of LocalQueue lq in team-a, admitted by cq
// when cq is not empty.
func queuedWorkload(name, lq, cq string) *berthv1.Workload {
	wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Spec: berthv1.WorkloadSpec{QueueName: lq}}
	if cq != "" {
		wl.Status.Admission = &berthv1.Admission{ClusterQueue: cq, PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main"}}}
	}
	return wl
}

// evictedReason is the Evicted reason of a stored workload, or "".
func evictedReason(t *testing.T, c client.Client, name string) string {
	t.Helper()
	wl := &berthv1.Workload{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: name}, wl); err != nil {
		t.Fatal(err)
	}
	if cnd := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionEvicted); cnd != nil && cnd.Status == metav1.ConditionTrue {
		return cnd.Reason
	}
	return ""
}

// checkErr fails the test unless err matches want (a substring; empty: no
// error).
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

// activeOf is the stored Active condition; nil when absent.
func activeOf(conds []metav1.Condition) *metav1.Condition {
	return meta.FindStatusCondition(conds, berthv1.ConditionActive)
}
