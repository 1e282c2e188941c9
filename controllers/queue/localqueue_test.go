package queue

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/scheduler"
)

func localQueue(p berthv1.StopPolicy) *berthv1.LocalQueue {
	return &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "lq", Generation: 2},
		Spec: berthv1.LocalQueueSpec{ClusterQueue: "cq", StopPolicy: p}}
}

func namespace(labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: labels}}
}

func selecting(sel *metav1.LabelSelector) func(*berthv1.ClusterQueue) {
	return func(cq *berthv1.ClusterQueue) { cq.Spec.NamespaceSelector = sel }
}

func inactiveCQ(cq *berthv1.ClusterQueue) {
	cq.Status.Conditions = []metav1.Condition{{Type: berthv1.ConditionActive, Status: metav1.ConditionFalse,
		Reason: berthv1.ReasonFlavorNotFound, Message: "ResourceFlavors h200 do not exist", LastTransitionTime: metav1.Unix(1, 0)}}
}

func TestLocalQueueReconcile(t *testing.T) {
	gpuTeams := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "gpu"}}
	cases := []struct {
		name        string
		objs        []client.Object
		noSeries    bool
		counts      scheduler.LocalQueueCounts
		fail        []fakeapi.Failure
		wantErr     string
		wantResult  reconcile.Result
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantWritten bool
		wantSeries  []string // reported, or forgotten for a queue that is gone
		syncErr     error
		wantSynced  []string // the workloads fed to the engine
		check       func(t *testing.T, c client.Client)
	}{
		{name: "a LocalQueue that is gone leaves the metrics", wantSeries: []string{"team-a/lq"}},
		{name: "a LocalQueue that is gone without series touches none", noSeries: true},
		{name: "a read that fails names the queue", objs: []client.Object{localQueue("")},
			fail: []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "LocalQueue"}}, wantErr: "reading LocalQueue team-a/lq"},
		{name: "a queue on an active ClusterQueue that selects every namespace accepts workloads",
			objs:       []client.Object{localQueue(""), clusterQueue()},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantWritten: true, wantSeries: []string{"team-a/lq"}},
		{name: "a held queue is inactive, whatever its ClusterQueue", objs: []client.Object{localQueue(berthv1.StopPolicyHold)},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonStopped, wantWritten: true, wantSeries: []string{"team-a/lq"}},
		{name: "a missing ClusterQueue is named", objs: []client.Object{localQueue("")},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonQueueClusterQueueNotFound, wantWritten: true, wantSeries: []string{"team-a/lq"}},
		{name: "a ClusterQueue read that fails names it", objs: []client.Object{localQueue(""), clusterQueue()},
			fail: []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "ClusterQueue"}}, wantErr: "reading ClusterQueue cq"},
		{name: "an unset namespaceSelector selects no namespace",
			objs:       []client.Object{localQueue(""), clusterQueue(selecting(nil))},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonQueueNamespaceNotAllowed, wantWritten: true, wantSeries: []string{"team-a/lq"}},
		{name: "a namespace with the selected labels is allowed",
			objs:       []client.Object{localQueue(""), clusterQueue(selecting(gpuTeams)), namespace(map[string]string{"team": "gpu"})},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantWritten: true, wantSeries: []string{"team-a/lq"}},
		{name: "a namespace without the selected labels is not allowed",
			objs:       []client.Object{localQueue(""), clusterQueue(selecting(gpuTeams)), namespace(map[string]string{"team": "cpu"})},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonQueueNamespaceNotAllowed, wantWritten: true, wantSeries: []string{"team-a/lq"}},
		{name: "a namespace read that fails names the namespace",
			objs:    []client.Object{localQueue(""), clusterQueue(selecting(gpuTeams)), namespace(nil)},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "Namespace"}},
			wantErr: "reading namespace team-a"},
		{name: "an inactive ClusterQueue's reason is passed on",
			objs:       []client.Object{localQueue(""), clusterQueue(inactiveCQ)},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonFlavorNotFound, wantWritten: true, wantSeries: []string{"team-a/lq"}},
		{name: "a queue holding workloads is written with its counts and looked at again",
			objs: []client.Object{localQueue(""), clusterQueue()}, counts: scheduler.LocalQueueCounts{Pending: 3, Admitted: 1},
			wantResult: reconcile.Result{RequeueAfter: interval},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantWritten: true, wantSeries: []string{"team-a/lq"},
			check: func(t *testing.T, c client.Client) {
				if lq := storedLQ(t, c); lq.Status.PendingWorkloads != 3 || lq.Status.AdmittedWorkloads != 1 {
					t.Errorf("counts = %d, %d; want 3, 1", lq.Status.PendingWorkloads, lq.Status.AdmittedWorkloads)
				}
			}},
		{name: "without series the counts are written but not reported", noSeries: true,
			objs: []client.Object{localQueue(""), clusterQueue()}, counts: scheduler.LocalQueueCounts{Pending: 1},
			wantResult: reconcile.Result{RequeueAfter: interval},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantWritten: true},
		{name: "a drained queue feeds its admitted workloads only to the engine, and evicts none itself",
			objs: []client.Object{localQueue(berthv1.StopPolicyHoldAndDrain), queuedWorkload("a", "lq", "cq"),
				queuedWorkload("b", "other", "cq"), queuedWorkload("c", "lq", "")},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonStopped, wantWritten: true, wantSeries: []string{"team-a/lq"},
			wantSynced: []string{"a"},
			check: func(t *testing.T, c client.Client) {
				for _, name := range []string{"a", "b", "c"} {
					if got := evictedReason(t, c, name); got != "" {
						t.Errorf("workload %s evicted %q by the reconciler; the scheduler writes evictions", name, got)
					}
				}
			}},
		{name: "a drain whose feed fails names the workload", objs: []client.Object{localQueue(berthv1.StopPolicyHoldAndDrain),
			queuedWorkload("a", "lq", "cq")}, syncErr: errors.New("boom"), wantSynced: []string{"a"},
			wantErr: "feeding workload team-a/a of drained LocalQueue lq"},
		{name: "a drain whose list fails names the queue", objs: []client.Object{localQueue(berthv1.StopPolicyHoldAndDrain)},
			fail: []fakeapi.Failure{{Verb: fakeapi.List, Kind: "Workload"}}, wantErr: "listing workloads of LocalQueue team-a/lq"},
		{name: "a status write that fails names the queue", objs: []client.Object{localQueue(""), clusterQueue()},
			fail: []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch, Kind: "LocalQueue"}}, wantErr: "writing status of LocalQueue team-a/lq",
			wantSeries: []string{"team-a/lq"}},
		{name: "a status that did not change is not written", objs: []client.Object{activeLQ(), clusterQueue()},
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonReady, wantSeries: []string{"team-a/lq"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, c := api(t, tc.fail, tc.objs...)
			s := &series{}
			eng := &engine{counts: tc.counts, syncErr: tc.syncErr}
			r := NewLocalQueueReconciler(c, eng, StatusLimits{Interval: interval}, s, !tc.noSeries)
			res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "lq"}})
			checkErr(t, err, tc.wantErr)
			if res != tc.wantResult {
				t.Errorf("result = %+v, want %+v", res, tc.wantResult)
			}
			if got := append(slices.Clone(s.lqReports), s.forgotten...); !slices.Equal(got, tc.wantSeries) {
				t.Errorf("series reported or forgotten %v, want %v", got, tc.wantSeries)
			}
			if !slices.Equal(eng.synced, tc.wantSynced) {
				t.Errorf("fed %v, want %v", eng.synced, tc.wantSynced)
			}
			if tc.wantErr != "" || len(tc.objs) == 0 {
				return
			}
			lq := storedLQ(t, base)
			if written := lq.ResourceVersion != "999"; written != tc.wantWritten {
				t.Errorf("written = %v, want %v", written, tc.wantWritten)
			}
			if a := activeOf(lq.Status.Conditions); a == nil || a.Status != tc.wantStatus || a.Reason != tc.wantReason || a.ObservedGeneration != 2 {
				t.Errorf("Active = %+v, want %s/%s at generation 2", a, tc.wantStatus, tc.wantReason)
			}
			if tc.check != nil {
				tc.check(t, base)
			}
		})
	}
}

// activeLQ is a LocalQueue whose status already says it accepts workloads.
func activeLQ() *berthv1.LocalQueue {
	lq := localQueue("")
	lq.Status.Conditions = []metav1.Condition{{Type: berthv1.ConditionActive, Status: metav1.ConditionTrue, Reason: berthv1.ReasonReady,
		Message: "the LocalQueue accepts workloads", ObservedGeneration: 2, LastTransitionTime: metav1.Unix(1, 0)}}
	return lq
}

func storedLQ(t *testing.T, c client.Client) *berthv1.LocalQueue {
	t.Helper()
	lq := &berthv1.LocalQueue{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: "lq"}, lq); err != nil {
		t.Fatal(err)
	}
	return lq
}

// TestLocalQueueResyncsRecords: the replicas a LocalQueue queues without
// Workloads are fed to the engine again at the first look at the queue,
// whenever what the engine decides on changes (its stop policy here), and
// when it is gone; not when only its status is written again.
func TestLocalQueueResyncsRecords(t *testing.T) {
	base, c := api(t, nil, localQueue(""), clusterQueue())
	eng := &engine{}
	r := NewLocalQueueReconciler(c, eng, StatusLimits{Interval: interval}, &series{}, false)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "lq"}}
	reconcileOnce := func() {
		t.Helper()
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	reconcileOnce()
	reconcileOnce()
	lq := storedLQ(t, base)
	lq.Spec.StopPolicy = berthv1.StopPolicyHold
	if err := base.Update(t.Context(), lq); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if err := base.Delete(t.Context(), lq); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if want := []string{"team-a/lq", "team-a/lq", "team-a/lq"}; !slices.Equal(eng.resynced, want) {
		t.Errorf("fed again %v, want at the first look, the stop and the deletion", eng.resynced)
	}
}
