package trainjob

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/jobset"
)

// The generic reconciler, run on TrainJobs through their Loader: the gang
// is read from the runtime, and a TrainJob's JobSet is not queued again.

type noChanges []admission.Change

func (c *noChanges) ReportChange(_ admission.WorkloadKey, ch admission.Change, _ runtime.Object) {
	*c = append(*c, ch)
}

// parents are the kinds setup registers as parents.
func parents() []jobs.Kind { return []jobs.Kind{jobset.Kind{}, Kind{}} }

// reconcileKind runs the reconciler of kind once for team-a/name on a
// client holding objs, and returns the client, the events and the changes
// it reported.
func reconcileKind(t *testing.T, kind jobs.Kind, name string, objs ...client.Object) (client.Client, []string, noChanges) {
	t.Helper()
	gvk := kind.GVK()
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).
		WithStatusSubresource(&trainer.TrainJob{}, &jobsetv1.JobSet{}, &berthv1.Workload{}).
		WithIndex(&berthv1.Workload{}, jobs.OwnerIndexKey(gvk), func(o client.Object) []string {
			if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == gvk.Kind {
				return []string{ref.Name}
			}
			return nil
		}).Build()
	changes := &noChanges{}
	rec := &fakeapi.Recorder{}
	opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: changes, Parents: parents()}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: name}}
	if _, err := jobs.NewReconciler(c, c, rec, kind, opts).Reconcile(t.Context(), req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	var notes []string
	for _, e := range rec.Events() {
		notes = append(notes, e.Reason+": "+e.Note)
	}
	return c, notes, *changes
}

func workloads(t *testing.T, c client.Client) []berthv1.Workload {
	t.Helper()
	list := &berthv1.WorkloadList{}
	if err := c.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// childJobSet is the JobSet the trainer makes for tj, labelled with its
// queue as berth's runtime patch labels it.
func childJobSet(tj *trainer.TrainJob, name string, pods int32, suspend bool) *jobsetv1.JobSet {
	rj := replicated("node", ancestorTrainer, 1, pods, "8")
	rj.Template.Spec.Completions = ptr.To(pods)
	return &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: name, UID: "js-uid",
		Labels: map[string]string{berthv1.QueueNameLabel: "team"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name,
			UID: tj.UID, Controller: ptr.To(true)}}},
		Spec: jobsetv1.JobSetSpec{Suspend: ptr.To(suspend), ReplicatedJobs: []jobsetv1.ReplicatedJob{rj}}}
}

func TestReconcileQueuesTheRuntimesGang(t *testing.T) {
	rt := clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 1, 0, "8"))
	c, events, _ := reconcileKind(t, Kind{}, "train", rt, newTrainJob("torch", nodes(2)))
	wls := workloads(t, c)
	if len(wls) != 1 {
		t.Fatalf("%d workloads, want 1 (events %v)", len(wls), events)
	}
	ps := wls[0].Spec.PodSets
	if len(ps) != 1 || ps[0].Name != "node" || ps[0].Count != 2 || !ps[0].Requests[gpu].Equal(resource.MustParse("8")) {
		t.Errorf("pod sets %+v, want node: 2 × 8 GPUs", ps)
	}
	tj := &trainer.TrainJob{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: "train"}, tj); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(tj.Spec.Suspend, false) {
		t.Error("the TrainJob runs before its Workload is admitted")
	}
}

func TestReconcileReportsAMissingRuntime(t *testing.T) {
	c, events, _ := reconcileKind(t, Kind{}, "train", newTrainJob("gone"))
	if n := len(workloads(t, c)); n != 0 {
		t.Errorf("%d workloads of a TrainJob whose runtime does not exist", n)
	}
	if !slices.ContainsFunc(events, func(e string) bool {
		return strings.HasPrefix(e, jobs.EventInvalidJob+": ") && strings.Contains(e, `ClusterTrainingRuntime "gone", does not exist`)
	}) {
		t.Errorf("events %v, want InvalidJob naming the runtime", events)
	}
}

// A running TrainJob admitted as 4 nodes whose runtime now runs 1 keeps
// the quota of the JobSet that still runs 4: the trainer built it from its
// snapshot of the runtime and does not change it while it runs.
func TestReconcileKeepsARunningTrainJobsQuota(t *testing.T) {
	tj := newTrainJob("torch", func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) })
	shrunk := clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 1, 0, "1"))
	wl := workloadOf(t, tj, true)
	wl.Spec.PodSets[0].Count = 4
	wl.Status.Admission.PodSetAssignments[0].Count = 4
	wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name,
		UID: tj.UID, Controller: ptr.To(true)}}
	wl.Finalizers = []string{berthv1.WorkloadFinalizer}
	c, events, changes := reconcileKind(t, Kind{}, "train", shrunk, tj, wl, childJobSet(tj, tj.Name, 4, false))
	got := workloads(t, c)[0].Spec.PodSets[0]
	if got.Count != 4 || !got.Requests[gpu].Equal(resource.MustParse("8")) {
		t.Errorf("pod set %+v, want the running JobSet's 4 × 8 GPUs (events %v, changes %v)", got, events, changes)
	}
}

// TestChildJobSet: the JobSet the trainer makes for a queued TrainJob is
// its child, held and charged through the TrainJob; a look-alike is not.
func TestChildJobSet(t *testing.T) {
	tj := newTrainJob("torch")
	tests := []struct {
		name      string
		js        *jobsetv1.JobSet
		wantChild bool
	}{
		{name: "the TrainJob's JobSet", js: childJobSet(tj, "train", 2, true), wantChild: true},
		{name: "another name under the TrainJob's controller reference", js: childJobSet(tj, "train-forged", 2, true)},
		{name: "the TrainJob's name, another UID", js: func() *jobsetv1.JobSet {
			js := childJobSet(tj, "train", 2, true)
			js.OwnerReferences[0].UID = "someone-else"
			return js
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := reconcileKind(t, jobset.Kind{}, tt.js.Name, tj.DeepCopy(), tt.js)
			if queued := len(workloads(t, c)) > 0; queued == tt.wantChild {
				t.Errorf("JobSet queued on its own: %v, want %v", queued, !tt.wantChild)
			}
			// A Job of the JobSet, as the JobSet controller makes it.
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: tt.js.Name + "-node-0",
				Labels: map[string]string{jobsetv1.JobSetNameKey: tt.js.Name, jobsetv1.ReplicatedJobNameKey: "node", jobsetv1.JobIndexKey: "0"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: jobsetv1.SchemeGroupVersion.String(), Kind: "JobSet", Name: tt.js.Name,
					UID: tt.js.UID, Controller: ptr.To(true)}}}}
			parent, kind, err := jobs.ParentOf(t.Context(), c, job, parents())
			if err != nil {
				t.Fatal(err)
			}
			want := "JobSet/" + tt.js.Name
			if tt.wantChild {
				want = "TrainJob/train"
			}
			if got := kind.GVK().Kind + "/" + parent.GetName(); got != want {
				t.Errorf("the Job's pods count against %s, want %s", got, want)
			}
		})
	}
}

// TestIsChild: only a JobSet of the TrainJob's name is its child.
func TestIsChild(t *testing.T) {
	tj := newTrainJob("torch")
	meta := func(kind, name string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
		m.SetGroupVersionKind(jobsetv1.SchemeGroupVersion.WithKind(kind))
		return m
	}
	for _, tc := range []struct {
		name  string
		child client.Object
		want  bool
	}{
		{"its JobSet", childJobSet(tj, "train", 1, true), true},
		{"its JobSet as metadata", meta("JobSet", "train"), true},
		{"a JobSet of another name", childJobSet(tj, "other", 1, true), false},
		{"another kind of its name", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train"}}, false},
		{"another kind of its name, as metadata", meta("Other", "train"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Kind{}).IsChild(tj, tc.child); got != tc.want {
				t.Errorf("IsChild = %v, want %v", got, tc.want)
			}
		})
	}
}
