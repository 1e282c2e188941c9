package batchjob

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// createCases queue new jobs, or refuse to.
func createCases() []jobCase {
	return []jobCase{
		{
			name: "a new job is suspended and queued as a Workload it owns",
			job:  trainJob(), wantEvents: []string{jobs.EventSuspended, jobs.EventCreatedWorkload},
			check: func(t *testing.T, c client.Client) {
				jobSuspended(true)(t, c)
				wl := storedWL(t, c)
				if wl == nil {
					t.Fatal("no workload created")
				}
				if wl.Spec.QueueName != "lq" || len(wl.Spec.PodSets) != 1 || wl.Spec.PodSets[0].Count != 2 {
					t.Errorf("workload spec = %+v, want queue lq and one pod set of 2", wl.Spec)
				}
				if !controllerutil.ContainsFinalizer(wl, berthv1.WorkloadFinalizer) {
					t.Error("the workload lacks the finalizer that keeps its quota until the pods are gone")
				}
				if ref := metav1.GetControllerOf(wl); ref == nil || ref.UID != "job-uid" {
					t.Errorf("controller = %+v, want the job", ref)
				}
			},
		},
		{
			name: "a job created suspended is only queued", job: trainJob(suspended),
			wantEvents: []string{jobs.EventCreatedWorkload}, check: phaseIs(lifecycle.Pending),
		},
		{name: "a job without a queue label is not berth's", job: trainJob(unlabelled), check: noWorkload},
		{
			name: "a job that runs no pods is reported, not queued", job: trainJob(suspended, noPods),
			wantEvents: []string{jobs.EventInvalidJob}, check: noWorkload,
		},
		{
			name: "a finished job that was never queued is left alone", job: trainJob(completed),
			check: func(t *testing.T, c client.Client) { noWorkload(t, c); jobSuspended(false)(t, c) },
		},
		{
			name: "a job read that fails names the job", job: trainJob(),
			fail:    []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "Job"}},
			wantErr: "reading Job team-a/train", check: noWorkload,
		},
		{
			name: "a suspension that fails is an error and nothing is queued", job: trainJob(),
			fail:    []fakeapi.Failure{{Verb: fakeapi.Update, Kind: "Job"}},
			wantErr: "suspending team-a/train", check: noWorkload,
		},
		{
			name: "a workload create that fails names the job", job: trainJob(suspended),
			fail:    []fakeapi.Failure{{Verb: fakeapi.Create, Kind: "Workload"}},
			wantErr: "creating workload for team-a/train", check: noWorkload,
		},
		{
			name: "a workload another reconcile created is no error", job: trainJob(suspended),
			fail: []fakeapi.Failure{{Verb: fakeapi.Create, Kind: "Workload", Err: alreadyExists()}},
		},
		{
			name: "a workload read that fails names the workload", job: trainJob(suspended),
			fail:    []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "Workload"}},
			wantErr: "reading workload " + wlName(),
		},
		{
			name: "a deleted job's workloads are deleted",
			objs: []client.Object{ownedWorkload(wlName(), "train"), ownedWorkload("job-other-abcde", "other")},
			check: func(t *testing.T, c client.Client) {
				noWorkload(t, c)
				if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: "job-other-abcde"}, &berthv1.Workload{}); err != nil {
					t.Errorf("another job's workload: %v", err)
				}
			},
		},
		{
			name: "a workload list that fails names the job",
			fail: []fakeapi.Failure{{Verb: fakeapi.List, Kind: "Workload"}}, wantErr: "listing workloads of Job team-a/train",
		},
		{
			name: "a workload delete that fails names the workload", objs: []client.Object{ownedWorkload(wlName(), "train")},
			fail: []fakeapi.Failure{{Verb: fakeapi.Delete, Kind: "Workload"}}, wantErr: "deleting workload team-a/" + wlName(),
		},
	}
}

// runCases move queued jobs through their Workload's phases.
func runCases() []jobCase {
	flavor := []client.Object{cpuFlavor()}
	return []jobCase{
		{
			name: "a pending job that changed updates its workload's pod sets", job: trainJob(suspended), queued: true,
			after: []func(*batchv1.Job){parallel(4)},
			check: func(t *testing.T, c client.Client) {
				if n := storedWL(t, c).Spec.PodSets[0].Count; n != 4 {
					t.Errorf("pod set count = %d, want 4", n)
				}
			},
		},
		{
			name: "a pending job someone resumed is suspended again", job: trainJob(suspended), queued: true,
			after:      []func(*batchv1.Job){func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }},
			wantEvents: []string{jobs.EventSuspended}, check: jobSuspended(true),
		},
		{
			name: "a pending job that became invalid loses its workload", job: trainJob(suspended), queued: true,
			after: []func(*batchv1.Job){noPods}, wantEvents: []string{jobs.EventInvalidJob, jobs.EventDequeued},
			check: func(t *testing.T, c client.Client) {
				if wl := storedWL(t, c); wl != nil && wl.DeletionTimestamp.IsZero() {
					t.Error("the workload of a job berth cannot read was kept")
				}
			},
		},
		{
			name: "an admitted job starts on its flavor's nodes", job: trainJob(suspended), objs: flavor, queued: true,
			wl: []func(*berthv1.Workload){admit}, wantEvents: []string{jobs.EventStarted},
			check: func(t *testing.T, c client.Client) {
				j := storedJob(t, c)
				if ptr.Deref(j.Spec.Suspend, true) || j.Spec.Template.Spec.NodeSelector["pool"] != "cpu" {
					t.Errorf("job suspend=%v nodeSelector=%v, want started on pool=cpu", ptr.Deref(j.Spec.Suspend, true), j.Spec.Template.Spec.NodeSelector)
				}
				if _, ok := j.Annotations[berthv1.OriginalSchedulingAnnotation]; !ok {
					t.Error("the job's own scheduling was not recorded")
				}
			},
		},
		{
			name: "an admitted job whose flavor is missing waits for it", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){admit}, wantEvents: []string{jobs.EventFlavorNotFound},
			wantResult: reconcile.Result{RequeueAfter: 10e9}, check: jobSuspended(true),
		},
		{
			name: "an admitted job whose flavor read fails names the flavor", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){admit}, fail: []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "ResourceFlavor"}},
			wantErr: "reading ResourceFlavor cpu", check: jobSuspended(true),
		},
		{
			name: "an admitted job whose start fails is an error", job: trainJob(suspended), objs: flavor, queued: true,
			wl: []func(*berthv1.Workload){admit}, fail: []fakeapi.Failure{{Verb: fakeapi.Update, Kind: "Job"}},
			wantErr: "starting team-a/train", check: jobSuspended(true),
		},
		{
			name: "a job that grew before it started is reported to the engine, not started, and not evicted here", job: trainJob(suspended),
			objs: flavor, queued: true, wl: []func(*berthv1.Workload){admit}, after: []func(*batchv1.Job){parallel(3)},
			wantChanges: []admission.Change{{Kind: admission.ChangeBeforeStart}},
			check:       func(t *testing.T, c client.Client) { jobSuspended(true)(t, c); phaseIs(lifecycle.Admitted)(t, c) },
		},
		{
			name: "an evicted running job is suspended", job: trainJob(suspended), objs: flavor, queued: true,
			wl: []func(*berthv1.Workload){evict}, after: []func(*batchv1.Job){func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }, activeJob},
			wantEvents: []string{jobs.EventStopped}, check: jobSuspended(true),
		},
		{
			name: "an evicted job whose pods still run keeps its quota", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){evict}, after: []func(*batchv1.Job){activeJob},
			check: phaseIs(lifecycle.Evicting),
		},
		{
			name: "an evicted stopped job is requeued once its pods are gone", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){evict}, check: phaseIs(lifecycle.Pending),
		},
		{
			name: "an evicted stopped job waits for pods that still terminate", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){evict}, podRunning: true,
			wantResult: reconcile.Result{RequeueAfter: 2e9}, check: phaseIs(lifecycle.Evicting),
		},
		{
			name: "a finished job finishes its workload", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){admit}, after: []func(*batchv1.Job){completed}, check: phaseIs(lifecycle.Finished),
		},
		{
			name: "a finish that fails to be written is an error", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){admit}, after: []func(*batchv1.Job){completed},
			fail: []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch, Kind: "Workload"}}, wantErr: "Finish on workload team-a/" + wlName(),
		},
		{
			name: "a workload that lost its finalizer gets it back", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){dropFinalizer}, wantEvents: []string{jobs.EventFinalizerRestored},
			check: func(t *testing.T, c client.Client) {
				if !controllerutil.ContainsFinalizer(storedWL(t, c), berthv1.WorkloadFinalizer) {
					t.Error("the finalizer was not restored")
				}
			},
		},
		{
			name: "a finalizer that cannot be restored is an error", job: trainJob(suspended), queued: true,
			wl: []func(*berthv1.Workload){dropFinalizer}, fail: []fakeapi.Failure{{Verb: fakeapi.Update, Kind: "Workload"}},
			wantErr: "restoring the finalizer of workload " + wlName(),
		},
		{
			name: "a job being deleted keeps its workload while its pods run", job: trainJob(suspended, kept), queued: true,
			after: []func(*batchv1.Job){activeJob}, deleteJob: true,
			check: func(t *testing.T, c client.Client) {
				if storedWL(t, c) == nil {
					t.Error("the workload went while the job's pods run")
				}
			},
		},
		{
			name: "a job being deleted whose pods are gone releases its workload", job: trainJob(suspended, kept), queued: true,
			deleteJob: true,
			check: func(t *testing.T, c client.Client) {
				if wl := storedWL(t, c); wl == nil || wl.DeletionTimestamp.IsZero() {
					t.Errorf("workload = %v, want it being deleted", wl)
				}
			},
		},
	}
}

// ownedWorkload is a Workload controlled by Job job.
func ownedWorkload(name, job string) *berthv1.Workload {
	return &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: "x", Controller: ptr.To(true)}}}}
}

// kept keeps a deleted job while the case looks at it.
func kept(j *batchv1.Job) { j.Finalizers = []string{"test/keep"} }
