package jobs

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// sizedJob is a started job of one pod set, "workers", whose size and
// status the test sets, of a kind whose own controller creates and deletes
// its pods (a Job, a PyTorchJob).
type sizedJob struct {
	GenericJob
	obj      *batchv1.Job
	pods     int32
	finished bool
}

func (j *sizedJob) Object() client.Object { return j.obj }
func (j *sizedJob) PodSets() ([]berthv1.PodSet, error) {
	return []berthv1.PodSet{{Name: "workers", Count: j.pods}}, nil
}
func (j *sizedJob) PodTemplates() []PodSetTemplate { return nil }
func (j *sizedJob) Scheduling() []PodSetScheduling { return nil }
func (j *sizedJob) IsSuspended() bool              { return false }
func (j *sizedJob) IsActive() bool                 { return !j.finished }
func (j *sizedJob) Finished() (bool, bool, string) { return j.finished, true, "the master succeeded" }

// runningWorkload is the Workload of a sizedJob admitted for pods workers,
// or, with pods 0, one never admitted.
func runningWorkload(pods int32) *berthv1.Workload {
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-train-1a2b3", UID: "wl-uid", Generation: 1,
			Finalizers: []string{berthv1.WorkloadFinalizer}},
		Spec: berthv1.WorkloadSpec{QueueName: "lq", PodSets: []berthv1.PodSet{{Name: "workers", Count: max(pods, 1)}}},
	}
	if pods > 0 {
		a := &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: "workers", Count: pods}}}
		if err := lifecycle.Apply(wl, lifecycle.Admit{Admission: a, Generation: 1, Message: "admitted by cq"}, metav1.Unix(1, 0)); err != nil {
			panic(err)
		}
	}
	return wl
}

// workerPod is pod i of the Workload's pod set workers, in phase.
func workerPod(i int, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train-worker-" + strconv.Itoa(i),
			Labels: map[string]string{berthv1.WorkloadLabel: "wl-uid", berthv1.PodSetLabel: "workers"}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// terminating is a running pod being deleted: it runs out its grace period.
func terminating(p *corev1.Pod) *corev1.Pod {
	p.Finalizers = []string{"example.com/keep"}
	p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	return p
}

// podsTest is a reconciler of sizedJobs over a fake API holding objs.
type podsTest struct {
	t   *testing.T
	c   client.WithWatch
	r   *Reconciler
	rec *fakeapi.Recorder
}

func newPodsTest(t *testing.T, objs ...client.Object) *podsTest {
	t.Helper()
	c := fakeapi.New(t, objs...)
	rec := &fakeapi.Recorder{}
	r := NewReconciler(c, c, rec, podKind{}, Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))})
	return &podsTest{t: t, c: c, r: r, rec: rec}
}

// reconcile reconciles job's gang once and returns its stored Workload.
func (p *podsTest) reconcile(job *sizedJob) (reconcile.Result, *berthv1.Workload) {
	p.t.Helper()
	res, err := p.r.reconcileGang(context.Background(), gang{job: job, workload: "job-train-1a2b3"})
	if err != nil {
		p.t.Fatalf("reconcile: %v", err)
	}
	wl := &berthv1.Workload{}
	if err := p.c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: "job-train-1a2b3"}, wl); err != nil {
		p.t.Fatal(err)
	}
	return res, wl
}

// end moves the named pods to phase Succeeded.
func (p *podsTest) end(names ...string) {
	p.t.Helper()
	for _, name := range names {
		pod := &corev1.Pod{}
		if err := p.c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: name}, pod); err != nil {
			p.t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodSucceeded
		if err := p.c.Status().Update(context.Background(), pod); err != nil {
			p.t.Fatal(err)
		}
	}
}

func trainObject() *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: "job-uid"}}
}

// TestFinishedJobHoldsQuotaWhilePodsRun: a job whose status says it ended
// while pods of its Workload still run (its workers, a cluster kept after
// it, pods running out their grace period) keeps its quota until they end;
// one without running pods, or never admitted, finishes at once.
func TestFinishedJobHoldsQuotaWhilePodsRun(t *testing.T) {
	tests := []struct {
		name     string
		admitted int32
		pod      *corev1.Pod
		wantHeld bool
	}{
		{"a pod still runs", 2, workerPod(1, corev1.PodRunning), true},
		{"a pod still terminates", 2, terminating(workerPod(1, corev1.PodRunning)), true},
		{"its pods ended", 2, workerPod(1, corev1.PodSucceeded), false},
		{"no pod", 2, nil, false},
		{"never admitted", 0, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{runningWorkload(tt.admitted)}
			if tt.pod != nil {
				objs = append(objs, tt.pod)
			}
			p := newPodsTest(t, objs...)
			job := &sizedJob{obj: trainObject(), pods: 2, finished: true}
			for pass := range 2 {
				res, wl := p.reconcile(job)
				if finished := lifecycle.IsFinished(wl); finished == tt.wantHeld {
					t.Fatalf("pass %d: finished %v (phase %s), want %v", pass, finished, lifecycle.PhaseOf(wl), !tt.wantHeld)
				}
				// The look that reports it comes first, then the waits
				// double: podsPoll, then twice that.
				if want := map[bool]time.Duration{true: podsPoll << pass}[tt.wantHeld]; res.RequeueAfter != want {
					t.Errorf("pass %d: requeue after %v, want %v", pass, res.RequeueAfter, want)
				}
				if tt.wantHeld && !lifecycle.HoldsQuota(lifecycle.PhaseOf(wl)) {
					t.Errorf("pass %d: phase %s holds no quota", pass, lifecycle.PhaseOf(wl))
				}
			}
			want := []string(nil)
			if tt.wantHeld {
				want = []string{EventFinishedPodsRunning} // once, not per poll
			}
			if got := p.rec.Reasons(); !slices.Equal(got, want) {
				t.Errorf("events %v, want %v", got, want)
			}
			if !tt.wantHeld {
				return
			}
			p.end(tt.pod.Name)
			if res, wl := p.reconcile(job); !lifecycle.IsFinished(wl) || res.RequeueAfter != 0 {
				t.Errorf("once its pods ended: finished %v, requeue after %v; want finished, no requeue", lifecycle.IsFinished(wl), res.RequeueAfter)
			}
		})
	}
}

// TestShrinkWaitsForRemovedPods: a running job shrunk from 4 pods to 1
// keeps the quota of the pods its controller removes until each ended.
func TestShrinkWaitsForRemovedPods(t *testing.T) {
	objs := []client.Object{runningWorkload(4), terminating(workerPod(3, corev1.PodRunning))}
	for i := range 3 {
		objs = append(objs, workerPod(i, corev1.PodRunning))
	}
	p := newPodsTest(t, objs...)
	job := &sizedJob{obj: trainObject(), pods: 1}
	steps := []struct {
		name        string
		ended       []string
		wantCount   int32
		wantRequeue time.Duration
	}{
		{"all 4 pods still run", nil, 4, podsPoll},
		{"two ended", []string{"train-worker-3", "train-worker-2"}, 2, podsPoll},
		{"three ended", []string{"train-worker-1"}, 1, 0},
		{"no change once in step", nil, 1, 0},
	}
	for _, s := range steps {
		p.end(s.ended...)
		res, wl := p.reconcile(job)
		if got := wl.Spec.PodSets[0].Count; got != s.wantCount {
			t.Errorf("%s: pod set count %d, want %d", s.name, got, s.wantCount)
		}
		if got := wl.Status.Admission.PodSetAssignments[0].Count; got != s.wantCount {
			t.Errorf("%s: admitted count %d, want %d", s.name, got, s.wantCount)
		}
		if res.RequeueAfter != s.wantRequeue {
			t.Errorf("%s: requeue after %v, want %v", s.name, res.RequeueAfter, s.wantRequeue)
		}
	}
	if got, want := p.rec.Reasons(), []string{EventResized, EventResized}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v (one per release)", got, want)
	}
}
