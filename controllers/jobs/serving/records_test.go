package serving

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/scheduler"
)

// fakeRecords answers Offer with what a test sets, and records the calls.
type fakeRecords struct {
	state     lifecycle.RecordState
	admission *berthv1.Admission
	offered   []*berthv1.Workload
	started   []*berthv1.Workload
	forgotten []admission.WorkloadKey
}

func (f *fakeRecords) Offer(_ context.Context, wl *berthv1.Workload, _ lifecycle.RecordRef) (lifecycle.RecordState, *berthv1.Admission, error) {
	f.offered = append(f.offered, wl.DeepCopy())
	return f.state, f.admission, nil
}

func (f *fakeRecords) Started(_ context.Context, wl *berthv1.Workload, _ lifecycle.RecordRef) error {
	f.started = append(f.started, wl.DeepCopy())
	return nil
}

func (f *fakeRecords) Forget(_ context.Context, key admission.WorkloadKey) {
	f.forgotten = append(f.forgotten, key)
}

// TestRecordedReplica drives the jobs reconciler through a replica that
// is admitted without a Workload: offered while the engine decides,
// released with its record in one patch once admitted, counted again
// from that record, forgotten once its pod is gone — and queued with a
// Workload when the engine says it must wait.
func TestRecordedReplica(t *testing.T) {
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1", Labels: queued}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "rs1",
			OwnerReferences: []metav1.OwnerReference{ref("Deployment", "web", "d1")}}},
		&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"},
			Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h200"}}},
		gpuPod("web-1-a", ref("ReplicaSet", "web-1", "rs1"), 1),
		gpuPod("web-1-b", ref("ReplicaSet", "web-1", "rs1"), 1),
	}
	c := indexedClient(t, DeploymentKind{}, objs...)
	recs := &fakeRecords{state: lifecycle.RecordOffered}
	rec := &fakeapi.Recorder{}
	changes := &seenChanges{}
	opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: changes, Records: recs, OfferReplicas: true}
	r := jobs.NewReconciler(c, c, rec, DeploymentKind{}, opts)
	reconcileOnce := func(pod string) {
		t.Helper()
		if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: pod}}); err != nil {
			t.Fatal(err)
		}
	}
	workloads := func() int {
		t.Helper()
		list := &berthv1.WorkloadList{}
		if err := c.List(t.Context(), list); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	name := jobs.KeyWorkloadName(pods.DeploymentKind, "ns", "web-1-a")

	reconcileOnce("web-1-a")
	if workloads() != 0 || len(recs.offered) != 1 {
		t.Fatalf("offered %d, %d Workloads; want the replica offered and no Workload", len(recs.offered), workloads())
	}
	if o := recs.offered[0]; o.Name != name || o.UID != "u-web-1-a" || o.Spec.PodSets[0].Requests.Name("nvidia.com/gpu", "").Value() != 1 {
		t.Errorf("offered %s (uid %s) %+v, want %s with the pod's UID and 1 GPU", o.Name, o.UID, o.Spec.PodSets, name)
	}

	recs.state = lifecycle.RecordAdmitted
	recs.admission = &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: PodSetName, Count: 1,
		Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}}}}
	reconcileOnce("web-1-a")
	p := &corev1.Pod{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "web-1-a"}, p); err != nil {
		t.Fatal(err)
	}
	if pods.IsGated(p) || p.Spec.NodeSelector["gpu"] != "h200" || p.Labels[berthv1.WorkloadLabel] != string(p.UID) {
		t.Errorf("released pod: gates %v, node selector %v, labels %v; want released on h200, labelled with its own UID",
			p.Spec.SchedulingGates, p.Spec.NodeSelector, p.Labels)
	}
	got := lifecycle.Record{}
	if err := json.Unmarshal([]byte(p.Annotations[berthv1.AdmissionRecordAnnotation]), &got); err != nil {
		t.Fatalf("record on the released pod: %v", err)
	}
	if got.Workload != name || got.Admission.ClusterQueue != "cq" || got.Spec.QueueName != "team" {
		t.Errorf("record = %+v, want the replica's name, admission and queue", got)
	}
	if len(recs.started) != 1 || workloads() != 0 || len(rec.Events()) != 0 {
		t.Errorf("started %d, %d Workloads, events %v; want started once, no Workload, no event", len(recs.started), workloads(), rec.Events())
	}

	// Seen again (a restart, any update): it runs on its record.
	recs.state = lifecycle.RecordNeedsWorkload
	reconcileOnce("web-1-a")
	if len(recs.started) != 2 || workloads() != 0 {
		t.Errorf("started %d, %d Workloads; want the record counted again and no Workload", len(recs.started), workloads())
	}
	if s := recs.started[1]; s.Name != name || s.UID != p.UID || s.Status.Admission == nil {
		t.Errorf("counted %s (uid %s) admission %v, want the record's Workload", s.Name, s.UID, s.Status.Admission)
	}

	// Resized to more than its record holds: the engine is told, and
	// evicts it (by deleting its pod).
	p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("2")
	if err := c.Update(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	reconcileOnce("web-1-a")
	if len(changes.seen) != 1 || changes.seen[0] != admission.ChangeGrew {
		t.Errorf("changes reported %v, want the replica's growth", changes.seen)
	}

	// A replica the engine did not admit at once is queued with a Workload.
	reconcileOnce("web-1-b")
	if workloads() != 1 {
		t.Errorf("%d Workloads, want the waiting replica's", workloads())
	}

	if err := c.Delete(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	reconcileOnce("web-1-a")
	if len(recs.forgotten) != 1 || recs.forgotten[0].Name != name {
		t.Errorf("forgotten %v, want %s once its pod is gone", recs.forgotten, name)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, &berthv1.Workload{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Workload for the recorded replica: %v", err)
	}
}

// eventually polls cond until it holds, or fails the test after a while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestRelabelledReplicaNotStartedOnItsOldAdmission drives the jobs
// reconciler against berth's scheduler through a replica admitted without
// a Workload whose pod, before it is released, is labelled with a priority
// class its LocalQueue does not grant: it is not released on the admission
// decided for its old spec, with the class's priority in its record. It is
// decided on again as it is now, and waits, gated, with a Workload that is
// held for its priority class.
func TestRelabelledReplicaNotStartedOnItsOldAdmission(t *testing.T) {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	cq := &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: berthv1.ClusterQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{},
		ResourceGroups: []berthv1.ResourceGroup{{CoveredResources: []corev1.ResourceName{gpu},
			Flavors: []berthv1.FlavorQuotas{{Name: "h200", Resources: []berthv1.ResourceQuota{{Name: gpu, NominalQuota: resource.MustParse("4")}}}}}},
	}}
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1", Labels: queued}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "rs1",
			OwnerReferences: []metav1.OwnerReference{ref("Deployment", "web", "d1")}}},
		&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"},
			Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h200"}}},
		&berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "team"}, Spec: berthv1.LocalQueueSpec{ClusterQueue: "cq"}},
		cq,
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000},
		gpuPod("web-1-a", ref("ReplicaSet", "web-1", "rs1"), 1),
	}
	c := indexedClient(t, DeploymentKind{}, objs...)
	s, err := scheduler.New(c, c, &fakeapi.Recorder{}, scheduler.Options{Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = s.Start(ctx) }()
	eventually(t, "the scheduler to serve", s.Serving)
	// As the ClusterQueue's reconciler does once its flavors exist.
	if err := s.UpsertClusterQueue(cq, lifecycle.QueueFlavors{}, false); err != nil {
		t.Fatal(err)
	}
	opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: s, Records: s, OfferReplicas: true}
	r := jobs.NewReconciler(c, c, &fakeapi.Recorder{}, DeploymentKind{}, opts)
	podKey := client.ObjectKey{Namespace: "ns", Name: "web-1-a"}
	reconcileOnce := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: podKey}); err != nil {
			t.Fatal(err)
		}
	}

	reconcileOnce()
	eventually(t, "the offered replica to be admitted", func() bool { return s.LocalQueueCounts("ns", "team").Admitted == 1 })
	p := &corev1.Pod{}
	if err := c.Get(ctx, podKey, p); err != nil {
		t.Fatal(err)
	}
	p.Labels[berthv1.PriorityClassLabel] = "system-node-critical"
	if err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if err := c.Get(ctx, podKey, p); err != nil {
		t.Fatal(err)
	}
	if rec, has := p.Annotations[berthv1.AdmissionRecordAnnotation]; !pods.IsGated(p) || has {
		t.Fatalf("relabelled replica released on its old admission, record %s; want it gated and decided on again", rec)
	}

	wlKey := client.ObjectKey{Namespace: "ns", Name: jobs.KeyWorkloadName(pods.DeploymentKind, "ns", "web-1-a")}
	wl := &berthv1.Workload{}
	eventually(t, "the replica to be queued with a Workload", func() bool {
		reconcileOnce()
		return c.Get(ctx, wlKey, wl) == nil
	})
	if wl.Spec.Priority != 2000001000 || wl.Status.Admission != nil {
		t.Errorf("Workload priority %d, admission %+v; want the class's priority, not admitted", wl.Spec.Priority, wl.Status.Admission)
	}
	// As the workload controller does on the Workload's creation.
	if err := s.Sync(ctx, wl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Workload to be held for its priority class", func() bool {
		if err := c.Get(ctx, wlKey, wl); err != nil {
			t.Fatal(err)
		}
		cond := lifecycle.Condition(wl, berthv1.ConditionQuotaReserved)
		return cond != nil && cond.Reason == string(berthv1.ReasonPriorityClassNotAllowed)
	})
	if got := s.LocalQueueCounts("ns", "team"); got.Admitted != 0 {
		t.Errorf("LocalQueue counts %+v, want nothing admitted", got)
	}
	if err := c.Get(ctx, podKey, p); err != nil || !pods.IsGated(p) {
		t.Errorf("the replica's pod: gated %v (%v), want it gated", pods.IsGated(p), err)
	}
}
