package batchjob

import (
	"k8s.io/apimachinery/pkg/runtime"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// The jobs reconciler is tested here, through the batch/v1 Job kind: the
// jobs package cannot import its kinds.

func trainJob(opts ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "job-uid", Labels: map[string]string{berthv1.QueueNameLabel: "lq"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})},
		}}},
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func suspended(j *batchv1.Job)  { j.Spec.Suspend = ptr.To(true) }
func unlabelled(j *batchv1.Job) { j.Labels = nil }
func noPods(j *batchv1.Job)     { j.Spec.Parallelism = ptr.To[int32](0) }
func activeJob(j *batchv1.Job)  { j.Status.Active = 2 }
func completed(j *batchv1.Job) {
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
}
func parallel(n int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To(n) }
}

func wlName() string { return jobs.WorkloadName("Job", trainJob()) }

// admit gives the workload an admission on flavor cpu.
func admit(wl *berthv1.Workload) {
	a := &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: PodSetName, Count: 2,
		Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "cpu"}}}}
	apply(wl, lifecycle.Admit{Admission: a, Generation: wl.Generation, Message: "admitted by cq"})
}

func evict(wl *berthv1.Workload) {
	admit(wl)
	apply(wl, lifecycle.Evict{Reason: berthv1.ReasonPreempted, Message: "preempted by a higher priority"})
}

func dropFinalizer(wl *berthv1.Workload) { wl.Finalizers = nil }

func apply(wl *berthv1.Workload, t lifecycle.Transition) {
	if err := lifecycle.Apply(wl, t, metav1.Unix(1, 0)); err != nil {
		panic(err)
	}
}

func cpuFlavor() *berthv1.ResourceFlavor {
	return &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}, Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"pool": "cpu"}}}
}

// runningPod is a running pod of the Workload with UID wlUID.
func runningPod(wlUID string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-0", Labels: map[string]string{berthv1.WorkloadLabel: wlUID}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// jobCase is one Reconcile of Job team-a/train. With queued, a first
// Reconcile creates its Workload, which wl then changes, before the one
// under test.
type jobCase struct {
	name   string
	job    *batchv1.Job
	objs   []client.Object
	queued bool
	wl     []func(*berthv1.Workload)
	// after changes the job between the two reconciles (a user's edit or
	// its controller's status); deleteJob then deletes it (it keeps a
	// finalizer, so it stays, being deleted).
	after     []func(*batchv1.Job)
	deleteJob bool
	// podRunning starts a pod of the Workload before the reconcile.
	podRunning bool
	fail       []fakeapi.Failure

	wantErr    string
	wantResult reconcile.Result
	wantEvents []string
	// wantChanges are the changes reported to the engine, which decides
	// the evictions they call for (the scheduler writes them).
	wantChanges []admission.Change
	check       func(t *testing.T, c client.Client)
}

// changes records what the reconciler reports to the engine.
type changes []admission.Change

func (c *changes) ReportChange(_ admission.WorkloadKey, ch admission.Change, _ runtime.Object) {
	*c = append(*c, ch)
}

func TestReconcile(t *testing.T) {
	for _, tc := range append(createCases(), runCases()...) {
		t.Run(tc.name, func(t *testing.T) { runJobCase(t, tc) })
	}
}

func runJobCase(t *testing.T, tc jobCase) {
	t.Helper()
	objs := slices.Clone(tc.objs)
	if tc.job != nil {
		objs = append(objs, tc.job)
	}
	b, err := fakeapi.Builder(objs...)
	if err != nil {
		t.Fatal(err)
	}
	gvk := Kind{}.GVK()
	base := b.WithIndex(&berthv1.Workload{}, jobs.OwnerIndexKey(gvk), func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == gvk.Kind {
			return []string{ref.Name}
		}
		return nil
	}).Build()
	opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: &changes{}}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "train"}}
	if tc.queued {
		prepare(t, base, opts, req, tc)
	}
	reported := &changes{}
	opts.Changes = reported
	c := fakeapi.Failing(base, tc.fail...)
	rec := &fakeapi.Recorder{}
	res, err := jobs.NewReconciler(c, c, rec, Kind{}, opts).Reconcile(t.Context(), req)
	if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
		t.Fatalf("error = %v, want %q", err, tc.wantErr)
	}
	if res != tc.wantResult {
		t.Errorf("result = %+v, want %+v", res, tc.wantResult)
	}
	if got := rec.Reasons(); !slices.Equal(got, tc.wantEvents) {
		t.Errorf("events %v, want %v", got, tc.wantEvents)
	}
	if !slices.Equal(*reported, tc.wantChanges) {
		t.Errorf("changes reported %v, want %v", *reported, tc.wantChanges)
	}
	if tc.check != nil {
		tc.check(t, base)
	}
}

// prepare queues the job as berth would, then applies the case's changes
// to its Workload and to the job.
func prepare(t *testing.T, c client.WithWatch, opts jobs.Options, req reconcile.Request, tc jobCase) {
	t.Helper()
	if _, err := jobs.NewReconciler(c, c, &fakeapi.Recorder{}, Kind{}, opts).Reconcile(t.Context(), req); err != nil {
		t.Fatalf("queueing the job: %v", err)
	}
	wl := storedWL(t, c)
	change(t, c, wl, tc.wl)
	if tc.podRunning {
		if err := c.Create(t.Context(), runningPod(string(wl.UID))); err != nil {
			t.Fatal(err)
		}
	}
	j := storedJob(t, c)
	change(t, c, j, tc.after)
	if tc.deleteJob {
		if err := c.Delete(t.Context(), j); err != nil {
			t.Fatalf("deleting the job: %v", err)
		}
	}
}

// change applies fs to obj, then writes its status and the rest, as the
// API server takes them: each write returns the stored object, so the
// second writes the changed copy kept aside, at the new resourceVersion.
func change[T client.Object](t *testing.T, c client.Client, obj T, fs []func(T)) {
	t.Helper()
	if len(fs) == 0 {
		return
	}
	for _, f := range fs {
		f(obj)
	}
	changed := obj.DeepCopyObject().(T)
	if err := c.Status().Update(t.Context(), obj); err != nil {
		t.Fatalf("changing the status of %s: %v", obj.GetName(), err)
	}
	changed.SetResourceVersion(obj.GetResourceVersion())
	if err := c.Update(t.Context(), changed); err != nil {
		t.Fatalf("changing %s: %v", obj.GetName(), err)
	}
}

func storedWL(t *testing.T, c client.Client) *berthv1.Workload {
	t.Helper()
	wl := &berthv1.Workload{}
	err := c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: wlName()}, wl)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

func storedJob(t *testing.T, c client.Client) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: "train"}, j); err != nil {
		t.Fatal(err)
	}
	return j
}

func alreadyExists() error {
	return apierrors.NewAlreadyExists(schema.GroupResource{Group: berthv1.GroupVersion.Group, Resource: "workloads"}, wlName())
}

// jobSuspended checks spec.suspend of the stored job.
func jobSuspended(want bool) func(*testing.T, client.Client) {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		if got := ptr.Deref(storedJob(t, c).Spec.Suspend, false); got != want {
			t.Errorf("job suspended = %v, want %v", got, want)
		}
	}
}

// noWorkload checks that the job has no Workload.
func noWorkload(t *testing.T, c client.Client) {
	t.Helper()
	if wl := storedWL(t, c); wl != nil {
		t.Errorf("workload %s exists, want none", wl.Name)
	}
}

func phaseIs(want lifecycle.Phase) func(*testing.T, client.Client) {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		wl := storedWL(t, c)
		if wl == nil {
			t.Fatal("no workload")
		}
		if got := lifecycle.PhaseOf(wl); got != want {
			t.Errorf("phase = %s, want %s", got, want)
		}
	}
}
