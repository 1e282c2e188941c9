package batchjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
)

// countingKind is the Job kind whose jobs count how often their gang is
// read.
type countingKind struct {
	Kind
	reads *int
}

func (k countingKind) Wrap(obj client.Object) jobs.GenericJob {
	return countingJob{Job: &Job{obj.(*batchv1.Job)}, reads: k.reads}
}

type countingJob struct {
	*Job
	reads *int
}

func (j countingJob) PodSets() ([]berthv1.PodSet, error) {
	*j.reads++
	return j.Job.PodSets()
}

// TestGangReadOncePerChange follows one Job through the events of its
// life and counts how often the reconciler reads its gang: once when the
// job is queued, and again only when the job or its Workload changed —
// never for the Workload it just created or wrote, nor for a status update
// of either.
func TestGangReadOncePerChange(t *testing.T) {
	job := trainJob(func(j *batchv1.Job) { j.Generation = 1 })
	reads := 0
	c := fakeapi.Generations(withOwnerIndex(t, job))
	r := jobs.NewReconciler(c, c, &fakeapi.Recorder{}, countingKind{reads: &reads},
		jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))})
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "train"}}
	reconcileOnce := func() {
		t.Helper()
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	// The fake API server sets neither UIDs nor generations: the events
	// set them as the API server would.
	steps := []struct {
		name      string
		event     func()
		wantReads int
	}{
		{name: "the job is queued", event: func() {}, wantReads: 1},
		{name: "its Workload is seen", event: func() {}, wantReads: 1},
		{name: "a pending reason is written on the Workload", event: func() {
			change(t, c, storedWL(t, c), []func(*berthv1.Workload){func(wl *berthv1.Workload) {
				meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: berthv1.ConditionQuotaReserved,
					Status: metav1.ConditionFalse, Reason: string(berthv1.ReasonPending), Message: "waiting for quota"})
			}})
		}, wantReads: 1},
		{name: "the job's status changes", event: func() {
			change(t, c, storedJob(t, c), []func(*batchv1.Job){func(j *batchv1.Job) { j.Status.Ready = ptr.To[int32](0) }})
		}, wantReads: 1},
		{name: "the job's topology annotation changes", event: func() {
			change(t, c, storedJob(t, c), []func(*batchv1.Job){func(j *batchv1.Job) {
				j.Annotations = map[string]string{berthv1.TopologyPreferredAnnotation: "rack"}
			}})
		}, wantReads: 2},
		{name: "its Workload's spec update is seen", event: func() {}, wantReads: 2},
		{name: "the job's spec changes", event: func() {
			change(t, c, storedJob(t, c), []func(*batchv1.Job){func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }})
		}, wantReads: 3},
		{name: "someone else edits the Workload's spec", event: func() {
			change(t, c, storedWL(t, c), []func(*berthv1.Workload){func(wl *berthv1.Workload) { wl.Spec.PodSets[0].Count = 1 }})
		}, wantReads: 4},
		{name: "nothing changed", event: func() {}, wantReads: 4},
	}
	for _, s := range steps {
		s.event()
		reconcileOnce()
		if reads != s.wantReads {
			t.Fatalf("after %q: the gang was read %d times, want %d", s.name, reads, s.wantReads)
		}
	}
	wl := storedWL(t, c)
	if got := wl.Spec.PodSets[0].Count; got != 3 {
		t.Errorf("workload pod set count = %d, want the job's new parallelism 3", got)
	}
	if wl.Spec.Topology == nil || wl.Spec.Topology.Level != "rack" {
		t.Errorf("workload topology = %+v, want the job's preferred level rack", wl.Spec.Topology)
	}
}

// withOwnerIndex is a fake API server holding objs, with the Workload
// owner index the reconciler lists by.
func withOwnerIndex(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	b, err := fakeapi.Builder(objs...)
	if err != nil {
		t.Fatal(err)
	}
	gvk := Kind{}.GVK()
	return b.WithIndex(&berthv1.Workload{}, jobs.OwnerIndexKey(gvk), func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == gvk.Kind {
			return []string{ref.Name}
		}
		return nil
	}).Build()
}

// TestGangWithClaimsReadEveryTime: a job whose pods use ResourceClaims is
// read on every event — a ResourceClaimTemplate can be replaced under the
// same name without changing the job.
func TestGangWithClaimsReadEveryTime(t *testing.T) {
	job := trainJob(func(j *batchv1.Job) {
		j.Generation = 1
		j.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
	})
	reads := 0
	c := fakeapi.Generations(withOwnerIndex(t, job))
	r := jobs.NewReconciler(c, c, &fakeapi.Recorder{}, countingKind{reads: &reads},
		jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))})
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "train"}}
	for i := 1; i <= 3; i++ {
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if reads != i {
			t.Fatalf("after %d reconciles the gang was read %d times, want every time", i, reads)
		}
	}
}
