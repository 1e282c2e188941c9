package scheduler

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
)

// recordWorld is a scheduler serving cq (4 CPUs) and lq, on a fake API
// holding objs.
func recordWorld(t *testing.T, objs ...client.Object) (*Scheduler, client.Client) {
	t.Helper()
	b, err := fakeapi.Builder(append([]client.Object{testCQ(), testLQ("")}, objs...)...)
	if err != nil {
		t.Fatal(err)
	}
	c := b.WithStatusSubresource(&berthv1.Workload{}).Build()
	s, err := New(c, c, &fakeapi.Recorder{}, Options{Metrics: metrics.New(), Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertClusterQueue(testCQ(), lifecycle.QueueFlavors{}, false); err != nil {
		t.Fatal(err)
	}
	s.serving.Store(true)
	return s, c
}

// replica is the Workload replica i would have, and its pod's reference.
func replica(i int, woken *atomic.Int32) (*berthv1.Workload, lifecycle.RecordRef) {
	wl := testWL(func(wl *berthv1.Workload) {
		wl.Name = fmt.Sprintf("deployment-api-%d", i)
		wl.UID = types.UID(fmt.Sprintf("pod-uid-%d", i))
		wl.CreationTimestamp = metav1.Unix(int64(10+i), 0)
	})
	return wl, lifecycle.RecordRef{Pod: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("api-%d", i)}, UID: wl.UID,
		Wake: func() { woken.Add(1) }}
}

func usedCPU(t *testing.T, s *Scheduler) (int, int64) {
	t.Helper()
	u, ok := s.engine.ClusterQueueUsage("cq")
	if !ok {
		t.Fatal("cq is not in the engine")
	}
	return u.Admitted, u.Flavors[0].Resources[0].Total
}

// TestOfferedReplicas: replicas offered without a Workload that fit are
// admitted in the next cycle with nothing written to the API server; one
// that does not fit waits in the engine, still without a Workload, and is
// admitted once quota is given back; one held for a reason someone must act
// on leaves the engine and needs its Workload, where the reason is written.
// A started record holds its quota against a Workload deletion of its name
// and gives it back on Forget.
func TestOfferedReplicas(t *testing.T) {
	s, c := recordWorld(t)
	ctx := t.Context()
	var woken atomic.Int32
	refs := map[int]lifecycle.RecordRef{}
	wls := map[int]*berthv1.Workload{}
	for i := range 6 {
		wl, ref := replica(i, &woken)
		if i == 5 {
			wl.Spec.QueueName = "missing"
		}
		wls[i], refs[i] = wl, ref
		state, _, err := s.Offer(ctx, wl, ref)
		if err != nil || state != lifecycle.RecordOffered {
			t.Fatalf("offer %d = %v, %v; want offered", i, state, err)
		}
	}
	s.cycle(ctx)
	if got := woken.Load(); got != 5 {
		t.Errorf("woken %d replicas, want the 4 admitted and the held one", got)
	}
	want := map[int]lifecycle.RecordState{0: lifecycle.RecordAdmitted, 1: lifecycle.RecordAdmitted, 2: lifecycle.RecordAdmitted,
		3: lifecycle.RecordAdmitted, 4: lifecycle.RecordOffered, 5: lifecycle.RecordNeedsWorkload}
	for i := range 6 {
		state, adm, err := s.Offer(ctx, wls[i], refs[i])
		switch {
		case err != nil:
			t.Fatal(err)
		case state != want[i]:
			t.Errorf("replica %d: %v, want %v", i, state, want[i])
		case state == lifecycle.RecordAdmitted && (adm == nil || adm.ClusterQueue != "cq"):
			t.Errorf("replica %d admitted %+v, want to cq", i, adm)
		}
	}
	if !s.engine.IsPending(lifecycle.KeyOf(wls[4])) {
		t.Error("the replica without room is not pending in the engine")
	}
	list := &berthv1.WorkloadList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) != 0 {
		t.Fatalf("Workloads written: %d (%v), want none", len(list.Items), err)
	}
	if n, used := usedCPU(t, s); n != 4 || used != 4000 {
		t.Fatalf("admitted %d using %dm, want 4 using 4000m", n, used)
	}
	for i := range 4 {
		wls[i].Status.Admission = &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 1,
			Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "f"}}}}
		if err := s.Started(ctx, wls[i], refs[i]); err != nil {
			t.Fatal(err)
		}
	}
	key0 := lifecycle.KeyOf(wls[0])
	s.DeleteWorkload(key0) // a Workload of that name went: not the replica's
	if n, used := usedCPU(t, s); n != 4 || used != 4000 {
		t.Fatalf("after a Workload deletion of a record's name: admitted %d using %dm, want 4 using 4000m", n, used)
	}
	s.Forget(ctx, key0)
	if n, used := usedCPU(t, s); n != 3 || used != 3000 {
		t.Fatalf("after its pod went: admitted %d using %dm, want 3 using 3000m", n, used)
	}
	s.cycle(ctx)
	if state, _, _ := s.Offer(ctx, wls[4], refs[4]); state != lifecycle.RecordAdmitted || woken.Load() != 6 {
		t.Errorf("the waiting replica, once quota was given back: %v (woken %d), want admitted and woken", state, woken.Load())
	}
}

// recordedPod is a released replica pod carrying a record of one CPU.
func recordedPod(name, uid string, edit func(*corev1.Pod)) *corev1.Pod {
	rec := lifecycle.Record{Workload: "deployment-" + name,
		Spec: testWL().Spec,
		Admission: berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 1,
			Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "f"}}}}}
	enc, err := lifecycle.EncodeRecord(rec)
	if err != nil {
		panic(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
		Labels:      map[string]string{berthv1.QueueNameLabel: "lq", berthv1.WorkloadLabel: uid},
		Annotations: map[string]string{berthv1.AdmissionRecordAnnotation: enc}}}
	if edit != nil {
		edit(p)
	}
	return p
}

// TestRecordsLoaded: a restarted scheduler counts the quota of every
// released replica whose pod holds a record it can trust, before its
// first cycle, and no other.
func TestRecordsLoaded(t *testing.T) {
	s, _ := recordWorld(t,
		recordedPod("a", "uid-a", nil),
		recordedPod("b", "uid-b", nil),
		recordedPod("ended", "uid-e", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		recordedPod("forged", "uid-f", func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "uid-a" }),
		recordedPod("gated", "uid-g", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
		}),
	)
	if err := s.load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, used := usedCPU(t, s); n != 2 || used != 2000 {
		t.Fatalf("loaded %d records using %dm, want the 2 live, trusted ones using 2000m", n, used)
	}
}

// TestRecordEvictedByDeletingItsPod: a preempted replica recorded on its
// pod is evicted by deleting that pod, by UID; its quota is held until the
// pod is gone.
func TestRecordEvictedByDeletingItsPod(t *testing.T) {
	p := recordedPod("a", "uid-a", nil)
	s, c := recordWorld(t, p)
	ctx := t.Context()
	if err := s.load(ctx); err != nil {
		t.Fatal(err)
	}
	key := admission.WorkloadKey{Namespace: ns, Name: "deployment-a"}
	s.applyPreemption(ctx, admission.Preemption{Victim: key, Preemptor: admission.WorkloadKey{Namespace: ns, Name: "w"}})
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the victim's pod: %v, want it deleted", err)
	}
	if n, _ := usedCPU(t, s); n != 1 {
		t.Fatalf("admitted %d, want the victim held until its pod is gone", n)
	}
	s.Forget(ctx, key)
	if n, _ := usedCPU(t, s); n != 0 {
		t.Fatalf("admitted %d after its pod went, want 0", n)
	}
}

// TestRecordsResyncedWithTheirQueue: when a LocalQueue stops, its waiting
// replica without a Workload is held and leaves for a Workload, where the
// reason is written; when it drains, its replica running on a record is
// evicted by deleting its pod.
func TestRecordsResyncedWithTheirQueue(t *testing.T) {
	p := recordedPod("a", "uid-a", nil)
	s, c := recordWorld(t, p)
	ctx := t.Context()
	if err := s.load(ctx); err != nil {
		t.Fatal(err)
	}
	var woken atomic.Int32
	wl, ref := replica(1, &woken)
	if _, _, err := s.Offer(ctx, wl, ref); err != nil {
		t.Fatal(err)
	}
	lq := &berthv1.LocalQueue{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lq"}, lq); err != nil {
		t.Fatal(err)
	}
	lq.Spec.StopPolicy = berthv1.StopPolicyHoldAndDrain
	if err := c.Update(ctx, lq); err != nil {
		t.Fatal(err)
	}
	if err := s.ResyncRecords(ctx, ns, "lq"); err != nil {
		t.Fatal(err)
	}
	s.cycle(ctx)
	if state, _, _ := s.Offer(ctx, wl, ref); state != lifecycle.RecordNeedsWorkload || woken.Load() != 1 {
		t.Errorf("the waiting replica of a stopped queue: %v (woken %d), want it to need its Workload", state, woken.Load())
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the running replica of a drained queue: %v, want its pod deleted", err)
	}
}

// TestRecordHeldWhileItsPodRuns: a replica whose gang no longer resolves
// (its pod let go by its ReplicaSet after a tenant changed a selector
// label) keeps its record's quota while the pod runs, through whatever
// grace period the tenant set; the resync's sweep gives it back once the
// pod has ended, is gone, or is another pod of the same name.
func TestRecordHeldWhileItsPodRuns(t *testing.T) {
	key := admission.WorkloadKey{Namespace: ns, Name: "deployment-a"}
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, c client.Client, p *corev1.Pod)
		held   bool
	}{
		{name: "still running", change: func(*testing.T, client.Client, *corev1.Pod) {}, held: true},
		{name: "being deleted", held: true, change: func(t *testing.T, c client.Client, p *corev1.Pod) {
			p.Finalizers = []string{"tenant.example/hold"}
			if err := c.Update(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "ended", change: func(t *testing.T, c client.Client, p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			if err := c.Status().Update(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "gone", change: func(t *testing.T, c client.Client, p *corev1.Pod) {
			if err := c.Delete(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "replaced by a pod of its name", change: func(t *testing.T, c client.Client, p *corev1.Pod) {
			if err := c.Delete(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(t.Context(), recordedPod("a", "uid-other", nil)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := recordedPod("a", "uid-a", nil)
			s, c := recordWorld(t, p)
			ctx := t.Context()
			if err := s.load(ctx); err != nil {
				t.Fatal(err)
			}
			s.Forget(ctx, key) // its gang no longer resolves
			if n, _ := usedCPU(t, s); n != 1 {
				t.Fatalf("admitted %d after its gang went, want its quota held while its pod runs", n)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				t.Fatal(err)
			}
			tt.change(t, c, p)
			s.sweepRecords(ctx)
			want := 0
			if tt.held {
				want = 1
			}
			if n, _ := usedCPU(t, s); n != want {
				t.Fatalf("admitted %d after the sweep, want %d", n, want)
			}
		})
	}
}

// TestRelabelledReplicaDecidedAgain: a replica offered without a Workload
// is released with the spec it is offered as, so the engine must decide on
// that spec. One whose pod takes a priority class its LocalQueue does not
// grant after it was offered — admitted and not yet released, or still
// waiting — is not answered admitted on the decision made for its old
// spec: it is offered again as it is, any admission given back, and held
// for the class, leaving the engine for a Workload where the reason is
// written. An offer of the same spec is answered as before.
func TestRelabelledReplicaDecidedAgain(t *testing.T) {
	critical := func(wl *berthv1.Workload) *berthv1.Workload {
		out := wl.DeepCopy()
		out.Spec.Priority, out.Spec.PriorityClassName = 2000001000, "system-node-critical"
		return out
	}
	for _, admitted := range []bool{true, false} {
		t.Run(fmt.Sprintf("admitted=%v", admitted), func(t *testing.T) {
			s, _ := recordWorld(t)
			ctx := t.Context()
			var woken atomic.Int32
			wl, ref := replica(0, &woken)
			if state, _, err := s.Offer(ctx, wl, ref); err != nil || state != lifecycle.RecordOffered {
				t.Fatalf("offer = %v, %v; want offered", state, err)
			}
			if admitted {
				s.cycle(ctx)
				if state, adm, err := s.Offer(ctx, wl.DeepCopy(), ref); err != nil || state != lifecycle.RecordAdmitted || adm == nil {
					t.Fatalf("offered again unchanged: %v, %+v, %v; want admitted", state, adm, err)
				}
			}
			relabelled := critical(wl)
			state, adm, err := s.Offer(ctx, relabelled, ref)
			if err != nil || state != lifecycle.RecordOffered || adm != nil {
				t.Fatalf("offered with a refused class: %v, %+v, %v; want offered again, without the old admission", state, adm, err)
			}
			if n, used := usedCPU(t, s); n != 0 || used != 0 {
				t.Errorf("admitted %d using %dm once re-offered, want the old admission given back", n, used)
			}
			key := lifecycle.KeyOf(wl)
			if reason, held := s.engine.Held(key); !held || reason != admission.PriorityClassNotAllowed {
				t.Errorf("held = %v (%s), want held for PriorityClassNotAllowed", held, reason)
			}
			s.cycle(ctx)
			if state, adm, _ := s.Offer(ctx, relabelled, ref); state != lifecycle.RecordNeedsWorkload || adm != nil {
				t.Errorf("after the cycle: %v, %+v; want it to need its Workload, where the reason is written", state, adm)
			}
			if n, _ := usedCPU(t, s); n != 0 {
				t.Errorf("admitted %d, want none", n)
			}
		})
	}
}
