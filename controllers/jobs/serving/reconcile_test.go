package serving

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// seenChanges records the changes reported to the engine.
type seenChanges struct{ seen []admission.ChangeKind }

func (s *seenChanges) ReportChange(_ admission.WorkloadKey, c admission.Change, _ runtime.Object) {
	s.seen = append(s.seen, c.Kind)
}

// TestReplicaLifecycle drives the jobs reconciler through one Deployment
// replica: its gated pod is queued as a Workload of one pod owned by the
// pod; once admitted the pod is released on the flavor; once the pod is
// gone the Workload, and its quota, go too.
func TestReplicaLifecycle(t *testing.T) {
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1", Labels: queued}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "rs1",
			OwnerReferences: []metav1.OwnerReference{ref("Deployment", "web", "d1")}}},
		&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"},
			Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h200"}}},
		gpuPod("web-1-a", ref("ReplicaSet", "web-1", "rs1"), 1),
	}
	k := DeploymentKind{}
	c := indexedClient(t, k, objs...)
	changes := &seenChanges{}
	opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: changes}
	rec := &fakeapi.Recorder{}
	r := jobs.NewReconciler(c, c, rec, k, opts)
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "web-1-a"}}
	reconcileOnce := func() {
		t.Helper()
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	wlKey := client.ObjectKey{Namespace: "ns", Name: jobs.KeyWorkloadName(pods.DeploymentKind, "ns", "web-1-a")}

	reconcileOnce()
	wl := &berthv1.Workload{}
	if err := c.Get(t.Context(), wlKey, wl); err != nil {
		t.Fatalf("the replica is queued: %v", err)
	}
	if o := wl.OwnerReferences; len(o) != 1 || o[0].Kind != "Pod" || o[0].Name != "web-1-a" {
		t.Errorf("owners = %v, want the pod", o)
	}
	if ps := wl.Spec.PodSets; len(ps) != 1 || ps[0].Count != 1 || ps[0].Requests.Name("nvidia.com/gpu", "").Value() != 1 {
		t.Errorf("pod sets = %+v, want one pod of 1 GPU", ps)
	}

	a := &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: PodSetName, Count: 1,
		Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}}}}
	if err := lifecycle.Apply(wl, lifecycle.Admit{Admission: a, Generation: wl.Generation, Message: "admitted"}, metav1.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(t.Context(), wl); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	p := &corev1.Pod{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "web-1-a"}, p); err != nil {
		t.Fatal(err)
	}
	if pods.IsGated(p) || p.Spec.NodeSelector["gpu"] != "h200" || p.Labels[berthv1.WorkloadLabel] != string(wl.UID) {
		t.Errorf("released pod: gates %v, node selector %v, labels %v", p.Spec.SchedulingGates, p.Spec.NodeSelector, p.Labels)
	}

	// Queued and released without an event: a scale-up of hundreds of
	// replicas would write hundreds of them.
	if ev := rec.Events(); len(ev) != 0 {
		t.Errorf("events for a replica queued and started: %+v, want none", ev)
	}

	// The Deployment is deleted with orphan propagation (its ReplicaSet
	// loses its controller, to be adopted by a new Deployment): the
	// released replica keeps running on its admission, not evicted.
	orphan(t, c, "web", "web-1")
	reconcileOnce()
	if len(changes.seen) != 0 {
		t.Errorf("the engine was told %v about a running replica whose Deployment was orphan-deleted, want nothing", changes.seen)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "web-1-a"}, p); err != nil || pods.IsGated(p) {
		t.Errorf("the released replica keeps running after its Deployment was orphan-deleted: %v, gates %v", err, p.Spec.SchedulingGates)
	}

	if err := c.Delete(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	err := c.Get(t.Context(), wlKey, wl)
	if !apierrors.IsNotFound(err) && wl.DeletionTimestamp.IsZero() {
		t.Errorf("the Workload of a replica whose pod is gone is deleted: %v", err)
	}
}

// orphan deletes Deployment name as orphan propagation does: its
// ReplicaSet rs loses its controller reference first.
func orphan(t *testing.T, c client.Client, name, rs string) {
	t.Helper()
	set := &appsv1.ReplicaSet{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: rs}, set); err != nil {
		t.Fatal(err)
	}
	set.OwnerReferences = nil
	if err := c.Update(t.Context(), set); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// indexedClient is a fake client holding objs whose pods are indexed by the
// gang key of kind k, as the manager's cache indexes them.
func indexedClient(t *testing.T, k DeploymentKind, objs ...client.Object) client.Client {
	t.Helper()
	b, err := fakeapi.Builder(objs...)
	if err != nil {
		t.Fatal(err)
	}
	return withControllerIndex(b).WithIndex(&corev1.Pod{}, jobs.KeyIndexKey(k.GVK()), func(o client.Object) []string {
		if key, ok := k.Key(o); ok {
			return []string{key}
		}
		return nil
	}).Build()
}

// TestGoneReplicaDeletesOnlyItsWorkload: once a replica's pod is gone, the
// Workload named for its gang and labelled with its key is deleted, found
// by name; a Workload of that name without the key label, and one with the
// key label under another name, are not the gang's and stay.
func TestGoneReplicaDeletesOnlyItsWorkload(t *testing.T) {
	workload := func(name, key string) *berthv1.Workload {
		wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if key != "" {
			wl.Labels = map[string]string{berthv1.JobKeyLabel: key}
		}
		return wl
	}
	nameOf := func(key string) string { return jobs.KeyWorkloadName(pods.DeploymentKind, "ns", key) }
	cases := []struct {
		name     string
		key      string
		workload *berthv1.Workload
		deleted  bool
	}{
		{name: "the gang's Workload", key: "web-1-a", workload: workload(nameOf("web-1-a"), "web-1-a"), deleted: true},
		{name: "its name without the key label", key: "web-1-a", workload: workload(nameOf("web-1-a"), "")},
		{name: "its name with another key", key: "web-1-a", workload: workload(nameOf("web-1-a"), "web-1-b")},
		{name: "its key under another name", key: "web-1-a", workload: workload("statefulset-web-1-a-abcde", "web-1-a")},
		{name: "no Workload at all", key: "web-1-a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.workload != nil {
				objs = append(objs, tc.workload)
			}
			c := indexedClient(t, DeploymentKind{}, objs...)
			opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: &seenChanges{}}
			r := jobs.NewReconciler(c, c, &fakeapi.Recorder{}, DeploymentKind{}, opts)
			req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: tc.key}}
			if _, err := r.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			if tc.workload == nil {
				return
			}
			err := c.Get(t.Context(), client.ObjectKeyFromObject(tc.workload), &berthv1.Workload{})
			if gone := apierrors.IsNotFound(err); gone != tc.deleted {
				t.Errorf("Workload %s deleted = %v (%v), want %v", tc.workload.Name, gone, err, tc.deleted)
			}
		})
	}
}
