package queue

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/scheduler"
)

func TestClusterQueueReconcile(t *testing.T) {
	flavors := []client.Object{flavorObj("h200"), flavorObj("a100")}
	with := func(objs ...client.Object) []client.Object { return append(slices.Clone(flavors), objs...) }
	busy := scheduler.QueueStatus{PendingWorkloads: 2, AdmittedWorkloads: 1}
	cases := []struct {
		name         string
		objs         []client.Object
		eng          engine
		fail         []fakeapi.Failure
		wroteBefore  bool
		wantErr      string
		wantResult   reconcile.Result
		wantReason   string // Active's stored reason; empty: not stored
		wantStatus   metav1.ConditionStatus
		wantMissing  []string
		wantWritten  bool
		wantPolicy   berthv1.StopPolicy // the stopPolicy fed with the queue
		wantDeleted  bool
		wantReported string // the report's Status; empty: no report
		check        func(t *testing.T, c client.Client)
	}{
		{name: "a ClusterQueue that is gone leaves the engine and the metrics", wantDeleted: true},
		{name: "a read that fails names the queue", objs: with(clusterQueue()),
			fail: []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "ClusterQueue"}}, wantErr: "reading ClusterQueue cq"},
		{name: "a queue whose flavors exist is active", objs: with(clusterQueue()), wantMissing: []string{},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantWritten: true, wantReported: metrics.QueueStatusActive},
		{name: "missing flavors are named, sorted, to the engine and in the condition", objs: []client.Object{clusterQueue()},
			wantMissing: []string{"a100", "h200"}, wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonFlavorNotFound,
			wantWritten: true, wantReported: metrics.QueueStatusPending},
		{name: "a flavor read that fails names the flavor", objs: with(clusterQueue()),
			fail: []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "ResourceFlavor"}}, wantErr: "reading ResourceFlavor h200"},
		{name: "a spec the engine refuses makes the queue inactive with the engine's words", objs: with(clusterQueue()),
			eng: engine{upsertErr: errors.New("flavor h200 listed twice")}, wantMissing: []string{},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonQueueInvalidSpec, wantWritten: true, wantReported: metrics.QueueStatusPending,
			check: func(t *testing.T, c client.Client) {
				if a := storedCQ(t, c); activeOf(a.Status.Conditions).Message != "flavor h200 listed twice" {
					t.Errorf("message = %q", activeOf(a.Status.Conditions).Message)
				}
			}},
		{name: "a held queue admits nothing new", objs: with(clusterQueue(stopped(berthv1.StopPolicyHold)),
			queuedWorkload("a", "lq", "cq")), wantMissing: []string{},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonStopped, wantWritten: true, wantReported: metrics.QueueStatusPending,
			check: func(t *testing.T, c client.Client) {
				if r := evictedReason(t, c, "a"); r != "" {
					t.Errorf("Hold evicted a workload (%s)", r)
				}
			}},
		{name: "a drained queue is fed to the engine, which evicts: nothing is evicted here", wantMissing: []string{},
			objs: with(clusterQueue(stopped(berthv1.StopPolicyHoldAndDrain)), queuedWorkload("a", "lq", "cq"),
				queuedWorkload("b", "lq", "other"), queuedWorkload("c", "lq", "")),
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonStopped, wantWritten: true, wantReported: metrics.QueueStatusPending,
			wantPolicy: berthv1.StopPolicyHoldAndDrain,
			check: func(t *testing.T, c client.Client) {
				for _, name := range []string{"a", "b", "c"} {
					if got := evictedReason(t, c, name); got != "" {
						t.Errorf("workload %s evicted %q by the reconciler; the scheduler writes evictions", name, got)
					}
				}
			}},
		{name: "a queue holding workloads is written and looked at again", objs: with(clusterQueue()),
			eng: engine{status: busy, known: true}, wantMissing: []string{}, wantResult: reconcile.Result{RequeueAfter: interval},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantWritten: true, wantReported: metrics.QueueStatusActive,
			check: func(t *testing.T, c client.Client) {
				if cq := storedCQ(t, c); cq.Status.PendingWorkloads != 2 || cq.Status.AdmittedWorkloads != 1 {
					t.Errorf("counts = %d pending, %d admitted; want 2, 1", cq.Status.PendingWorkloads, cq.Status.AdmittedWorkloads)
				}
			}},
		{name: "counts that changed within the interval wait for it", objs: with(activeCQ()), wroteBefore: true,
			eng: engine{status: busy, known: true}, wantMissing: []string{}, wantResult: reconcile.Result{RequeueAfter: interval},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantReported: metrics.QueueStatusActive},
		{name: "a status that did not change is not written", objs: with(activeCQ()), wantMissing: []string{},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantReported: metrics.QueueStatusActive},
		{name: "a status write that fails names the queue", objs: with(clusterQueue()), wantMissing: []string{},
			fail: []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch, Kind: "ClusterQueue"}}, wantErr: "writing status of ClusterQueue cq",
			wantReported: metrics.QueueStatusActive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, c := api(t, tc.fail, tc.objs...)
			eng, s := tc.eng, &series{}
			r := NewClusterQueueReconciler(c, &eng, StatusLimits{Interval: interval}, s)
			if tc.wroteBefore {
				r.throttle.wrote("cq")
			}
			res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "cq"}})
			checkErr(t, err, tc.wantErr)
			if tc.wantErr == "" && !approxResult(res, tc.wantResult) {
				t.Errorf("result = %+v, want %+v", res, tc.wantResult)
			}
			switch {
			case tc.wantMissing == nil && len(eng.upserted) != 0:
				t.Errorf("upserts %v, want none", eng.upserted)
			case tc.wantMissing != nil && (len(eng.upserted) != 1 || !slices.Equal(eng.upserted[0], tc.wantMissing)):
				t.Errorf("upserts with missing flavors %v, want one with %v", eng.upserted, tc.wantMissing)
			}
			if tc.wantDeleted != (len(eng.deleted) == 1 && len(s.forgotten) == 1) {
				t.Errorf("deleted %v, forgotten %v; want deleted=%v", eng.deleted, s.forgotten, tc.wantDeleted)
			}
			if tc.wantPolicy != "" && (len(eng.policies) != 1 || eng.policies[0] != tc.wantPolicy) {
				t.Errorf("fed stopPolicies %v, want %s", eng.policies, tc.wantPolicy)
			}
			if got := reportedStatus(s); got != tc.wantReported {
				t.Errorf("reported status %q, want %q", got, tc.wantReported)
			}
			if tc.wantErr != "" || tc.wantDeleted {
				return
			}
			cq := storedCQ(t, base)
			if written := cq.ResourceVersion != "999"; written != tc.wantWritten {
				t.Errorf("written = %v, want %v", written, tc.wantWritten)
			}
			if a := activeOf(cq.Status.Conditions); a == nil || a.Status != tc.wantStatus || a.Reason != tc.wantReason || a.ObservedGeneration != 3 {
				t.Errorf("Active = %+v, want %s/%s at generation 3", a, tc.wantStatus, tc.wantReason)
			}
			if tc.check != nil {
				tc.check(t, base)
			}
		})
	}
}

// activeCQ is an empty ClusterQueue whose status already says it is
// active.
func activeCQ() *berthv1.ClusterQueue {
	cq := clusterQueue()
	cq.Status.Conditions = []metav1.Condition{{Type: berthv1.ConditionActive, Status: metav1.ConditionTrue, Reason: berthv1.ReasonReady,
		Message: "the ClusterQueue can admit workloads", ObservedGeneration: 3, LastTransitionTime: metav1.Unix(1, 0)}}
	return cq
}

func storedCQ(t *testing.T, c client.Client) *berthv1.ClusterQueue {
	t.Helper()
	cq := &berthv1.ClusterQueue{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "cq"}, cq); err != nil {
		t.Fatal(err)
	}
	return cq
}

func reportedStatus(s *series) string {
	if len(s.reports) == 0 {
		return ""
	}
	return s.reports[len(s.reports)-1].Status
}

// approxResult compares results, allowing a throttle wait to be a little
// under the interval: it is measured from the wall clock.
func approxResult(got, want reconcile.Result) bool {
	if want.RequeueAfter == 0 || got.RequeueAfter == want.RequeueAfter {
		return got == want
	}
	return got.RequeueAfter > want.RequeueAfter-interval/2 && got.RequeueAfter <= want.RequeueAfter
}

// The engine judges a flavor by the node labels its queue brings: the
// reconciler reads them with the flavors it checks exist.
func TestClusterQueueFlavorLabels(t *testing.T) {
	h200 := flavorObj("h200")
	h200.Spec.NodeLabels = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}
	_, c := api(t, nil, clusterQueue(), h200)
	var eng engine
	r := NewClusterQueueReconciler(c, &eng, StatusLimits{Interval: interval}, &series{})
	if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "cq"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{"h200": {"nvidia.com/gpu.product": "NVIDIA-H200"}}
	if len(eng.labels) != 1 || !reflect.DeepEqual(eng.labels[0], want) || !slices.Equal(eng.upserted[0], []string{"a100"}) {
		t.Fatalf("upserted with missing %v and labels %v; want [a100] and %v", eng.upserted, eng.labels, want)
	}
}
