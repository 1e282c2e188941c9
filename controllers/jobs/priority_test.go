package jobs

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// TestWorkloadEventPriority: a Workload update that asks its job to act —
// admitted, or being evicted — queues its gang ahead of the default
// priority that pod and job events have; other updates queue at the
// default, and the initial list and resyncs behind it.
func TestWorkloadEventPriority(t *testing.T) {
	at := metav1.Unix(1, 0)
	pending := func() *berthv1.Workload {
		return &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", ResourceVersion: "1",
			Labels: map[string]string{berthv1.JobKeyLabel: "gang"}},
			Spec: berthv1.WorkloadSpec{QueueName: "q", PodSets: []berthv1.PodSet{{Name: "main", Count: 1}}}}
	}
	apply := func(t *testing.T, wl *berthv1.Workload, tr lifecycle.Transition, rv string) *berthv1.Workload {
		t.Helper()
		out := wl.DeepCopy()
		if err := lifecycle.Apply(out, tr, at); err != nil {
			t.Fatal(err)
		}
		out.ResourceVersion = rv
		return out
	}
	admit := lifecycle.Admit{Admission: &berthv1.Admission{ClusterQueue: "cq",
		PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 1}}}, Message: "admitted"}
	admitted := func(t *testing.T) *berthv1.Workload { return apply(t, pending(), admit, "2") }
	cases := []struct {
		name     string
		old, new func(t *testing.T) *berthv1.Workload
		want     int
	}{
		{name: "admitted", old: func(*testing.T) *berthv1.Workload { return pending() }, new: admitted, want: ActPriority},
		{name: "being evicted", old: admitted, want: ActPriority, new: func(t *testing.T) *berthv1.Workload {
			return apply(t, admitted(t), lifecycle.Evict{Reason: berthv1.ReasonPreempted, Message: "preempted"}, "3")
		}},
		{name: "still pending, a new reason", old: func(*testing.T) *berthv1.Workload { return pending() }, want: 0,
			new: func(t *testing.T) *berthv1.Workload {
				return apply(t, pending(), lifecycle.Queue{Reason: berthv1.ReasonPending, Message: "waits"}, "2")
			}},
		{name: "a resync", old: admitted, new: admitted, want: handler.LowPriority},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			h := workloadEvents(keyGang)
			h.Update(t.Context(), event.UpdateEvent{ObjectOld: tc.old(t), ObjectNew: tc.new(t)}, q)
			req, priority, _ := q.GetWithPriority()
			if want := (reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "gang"}}); req != want {
				t.Errorf("queued %v, want %v", req, want)
			}
			if priority != tc.want {
				t.Errorf("priority %d, want %d", priority, tc.want)
			}
		})
	}

	t.Run("initial list", func(t *testing.T) {
		q := priorityqueue.New[reconcile.Request]("test")
		defer q.ShutDown()
		workloadEvents(keyGang).Create(t.Context(), event.CreateEvent{Object: pending(), IsInInitialList: true}, q)
		if _, priority, _ := q.GetWithPriority(); priority != handler.LowPriority {
			t.Errorf("priority %d, want %d", priority, handler.LowPriority)
		}
	})
}

// TestOwnerGang maps a Workload to the job of the reconciler's kind that
// controls it, and to nothing for another kind's or an owner that does not
// control it.
func TestOwnerGang(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	ref := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "train", UID: "u", Controller: &controller}
	}
	cases := []struct {
		name string
		refs []metav1.OwnerReference
		ok   bool
	}{
		{name: "controlled by a Job", refs: []metav1.OwnerReference{ref("batch/v1", "Job", true)}, ok: true},
		{name: "owned, not controlled", refs: []metav1.OwnerReference{ref("batch/v1", "Job", false)}},
		{name: "another group's Job", refs: []metav1.OwnerReference{ref("example.com/v1", "Job", true)}},
		{name: "another kind", refs: []metav1.OwnerReference{ref("batch/v1", "CronJob", true)}},
		{name: "no owner"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", OwnerReferences: tc.refs}}
			req, ok := ownerGang(gvk)(wl)
			if ok != tc.ok {
				t.Fatalf("mapped = %v, want %v", ok, tc.ok)
			}
			if ok && req.NamespacedName != (types.NamespacedName{Namespace: "ns", Name: "train"}) {
				t.Errorf("mapped to %v, want ns/train", req)
			}
		})
	}
}
