package workload

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/scheduler"
)

// queueCases feed live workloads to the engine and record why one cannot
// be queued.
func queueCases(engineErr error) []reconcileCase {
	return []reconcileCase{
		{
			name: "a workload that is gone is forgotten by the engine", wantDeleted: true,
			check: removed,
		},
		{
			name: "a read that fails is an error that names the workload", objs: []client.Object{workload()},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "Workload"}},
			wantErr: "reading workload team-a/train", check: unchanged,
		},
		{
			name: "a queueable workload is fed to the engine and nothing is written", objs: []client.Object{workload()},
			wantSynced: 1, check: unchanged,
		},
		{
			name: "an admitted workload is fed to the engine and nothing is written", objs: []client.Object{workload(admitted)},
			wantSynced: 1, check: unchanged,
		},
		{
			name: "the engine's error is returned", objs: []client.Object{workload()}, engineErr: engineErr,
			wantErr: engineErr.Error(), wantSynced: 1, check: unchanged,
		},
		{
			name: "a spec the engine refused is recorded with a warning on the workload and its job",
			objs: []client.Object{workload()}, unq: refused(), wantSynced: 1,
			wantEvents: []string{lifecycle.EventUnqueueable + " Workload", lifecycle.EventUnqueueable + " Job"},
			check:      wantCondition(berthv1.ConditionQuotaReserved, metav1.ConditionFalse, berthv1.ReasonInvalidSpec, refused().Message),
		},
		{
			name: "a refused workload's Admitted condition says it waits",
			objs: []client.Object{workload()}, unq: refused(), wantSynced: 1,
			wantEvents: []string{lifecycle.EventUnqueueable + " Workload", lifecycle.EventUnqueueable + " Job"},
			check:      wantCondition(berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonPending, "waiting for quota"),
		},
		{
			name: "an invalid spec the engine refused is recorded",
			objs: []client.Object{workload()}, wantSynced: 1,
			unq:        &scheduler.Unqueueable{Reason: berthv1.ReasonInvalidSpec, Message: "pod set main asks for no resources"},
			wantEvents: []string{lifecycle.EventUnqueueable + " Workload", lifecycle.EventUnqueueable + " Job"},
			check: wantCondition(berthv1.ConditionQuotaReserved, metav1.ConditionFalse, berthv1.ReasonInvalidSpec,
				"pod set main asks for no resources"),
		},
		{
			name: "an owner that is not the controller gets no event",
			objs: []client.Object{workload(notControlled)}, unq: refused(), wantSynced: 1,
			wantEvents: []string{lifecycle.EventUnqueueable + " Workload"},
			check:      wantCondition(berthv1.ConditionQuotaReserved, metav1.ConditionFalse, berthv1.ReasonInvalidSpec, ""),
		},
		{
			name: "a reason already on record is neither written nor announced again",
			objs: []client.Object{workload(queued(refused().Reason, refused().Message))}, unq: refused(), wantSynced: 1,
			check: wantCondition(berthv1.ConditionQuotaReserved, metav1.ConditionFalse, berthv1.ReasonInvalidSpec, refused().Message),
		},
		{
			name: "a new reason replaces the one on record",
			objs: []client.Object{workload(queued(berthv1.ReasonClusterQueueStopped, "ClusterQueue cq is stopped"))},
			unq:  refused(), wantSynced: 1,
			wantEvents: []string{lifecycle.EventUnqueueable + " Workload", lifecycle.EventUnqueueable + " Job"},
			check:      wantCondition(berthv1.ConditionQuotaReserved, metav1.ConditionFalse, berthv1.ReasonInvalidSpec, refused().Message),
		},
		{
			name: "a status write that fails is an error and announces nothing",
			objs: []client.Object{workload()}, unq: refused(), wantSynced: 1,
			fail:    []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch, Kind: "Workload"}},
			wantErr: "Queue on workload team-a/train", check: unchanged,
		},
		{
			name: "a status write that keeps conflicting is an error after the re-reads",
			objs: []client.Object{workload()}, unq: refused(), wantSynced: 1,
			fail:    []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch, Kind: "Workload", Err: conflict()}},
			wantErr: "Queue on workload team-a/train", check: unchanged,
		},
		{
			name: "a conflict that outlasts the retries is returned as the API server's, to be retried",
			objs: []client.Object{workload()}, unq: refused(), wantSynced: 1,
			fail:    []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch, Kind: "Workload", Err: conflict()}},
			wantErr: "Operation cannot be fulfilled", check: unchanged,
		},
		{
			name: "a workload without the finalizer or an owner is fed to the engine, not released",
			objs: []client.Object{workload(noFinalizer, orphaned)}, wantSynced: 1,
			check: func(t *testing.T, c client.Client) {
				if get(t, c) == nil {
					t.Error("a workload berth did not create was deleted")
				}
			},
		},
		{
			name: "a workload that is finished is fed to the engine and nothing is written",
			objs: []client.Object{workload(finished)}, wantSynced: 1,
			check: wantCondition(berthv1.ConditionFinished, metav1.ConditionTrue, "Succeeded", ""),
		},
	}
}

// deactivateCases feed deactivated workloads to the engine, which decides
// whether they are held or evicted; the scheduler writes its decisions, so
// the reconciler writes nothing, counts nothing and announces nothing.
func deactivateCases() []reconcileCase {
	return []reconcileCase{
		{
			name: "a deactivated admitted workload is fed to the engine and not evicted here",
			objs: []client.Object{workload(admitted, inactive)}, wantSynced: 1, check: unchanged,
		},
		{
			name: "a deactivated pending workload is fed to the engine and nothing is written",
			objs: []client.Object{workload(inactive)}, wantSynced: 1, check: unchanged,
		},
		{
			name: "a deactivated workload already evicting is fed to the engine and nothing is written",
			objs: []client.Object{workload(evicting, inactive)}, wantSynced: 1,
			check: wantCondition(berthv1.ConditionEvicted, metav1.ConditionTrue, berthv1.ReasonPreempted, ""),
		},
	}
}

// releaseCases let Workloads whose job is going or gone go once no pod of
// theirs runs.
func releaseCases(engineErr error) []reconcileCase {
	requeue := reconcile.Result{RequeueAfter: podsPoll}
	running := pod("train-0", wlUID, corev1.PodRunning)
	return []reconcileCase{
		{
			name: "a pending workload being deleted leaves the engine and loses its finalizer",
			objs: []client.Object{workload(deleting)}, wantDeleted: true, check: removed,
		},
		{
			name: "an admitted workload being deleted keeps its quota while a pod runs",
			objs: []client.Object{workload(deleting, admitted), running}, wantSynced: 1,
			wantResult: requeue, check: kept,
		},
		{
			name: "a pending pod still counts as running",
			objs: []client.Object{workload(deleting, admitted), pod("train-0", wlUID, corev1.PodPending)}, wantSynced: 1,
			wantResult: requeue, check: kept,
		},
		{
			name: "an admitted workload being deleted goes once its pods ended",
			objs: []client.Object{workload(deleting, admitted), pod("train-0", wlUID, corev1.PodSucceeded),
				pod("train-1", wlUID, corev1.PodFailed)},
			wantSynced: 1, check: removed,
		},
		{
			name:       "pods of another workload do not hold this one",
			objs:       []client.Object{workload(deleting, admitted), pod("other-0", "other-uid", corev1.PodRunning)},
			wantSynced: 1, check: removed,
		},
		{
			name: "an evicting workload being deleted keeps its quota while a pod runs",
			objs: []client.Object{workload(deleting, evicting), running}, wantSynced: 1,
			wantResult: requeue, check: kept,
		},
		{
			name: "a pending workload being deleted does not wait for pods",
			objs: []client.Object{workload(deleting), running}, wantDeleted: true, check: removed,
		},
		{
			name: "an orphaned pending workload is deleted",
			objs: []client.Object{workload(orphaned)}, wantDeleted: true, check: removed,
		},
		{
			name: "an orphaned admitted workload keeps its quota while a pod runs",
			objs: []client.Object{workload(orphaned, admitted), running}, wantSynced: 1,
			wantResult: requeue, check: kept,
		},
		{
			name: "an orphaned admitted workload is deleted once its pods are gone",
			objs: []client.Object{workload(orphaned, admitted)}, wantSynced: 1, check: removed,
		},
		{
			name: "the engine's error keeps the workload being deleted",
			objs: []client.Object{workload(deleting, admitted)}, engineErr: engineErr, wantSynced: 1,
			wantErr: engineErr.Error(), check: kept,
		},
		{
			name: "a pod list that fails is an error and keeps the workload",
			objs: []client.Object{workload(deleting, admitted)}, wantSynced: 1,
			fail:    []fakeapi.Failure{{Verb: fakeapi.List, Kind: "Pod"}},
			wantErr: "listing the pods of workload team-a/train", check: kept,
		},
		{
			name: "a finalizer patch that fails is an error that names the workload",
			objs: []client.Object{workload(deleting)}, wantDeleted: true,
			fail:    []fakeapi.Failure{{Verb: fakeapi.Patch, Kind: "Workload"}},
			wantErr: "removing the finalizer of workload team-a/train", check: kept,
		},
		{
			name: "a finalizer patch refused for a stale copy waits for the newer copy's update, without an error",
			objs: []client.Object{workload(deleting)}, wantDeleted: true,
			fail:  []fakeapi.Failure{{Verb: fakeapi.Patch, Kind: "Workload", Err: conflict()}},
			check: kept,
		},
		{
			name: "a finalizer patch on a workload already gone is no error",
			objs: []client.Object{workload(deleting)}, wantDeleted: true,
			fail:  []fakeapi.Failure{{Verb: fakeapi.Patch, Kind: "Workload", Err: notFound()}},
			check: kept,
		},
		{
			name: "a delete of an orphan that fails is an error that names the workload",
			objs: []client.Object{workload(orphaned)}, wantDeleted: true,
			fail:    []fakeapi.Failure{{Verb: fakeapi.Delete, Kind: "Workload"}},
			wantErr: "deleting orphaned workload team-a/train",
			check: func(t *testing.T, c client.Client) {
				wl := get(t, c)
				if wl == nil || len(wl.Finalizers) != 0 {
					t.Errorf("want the workload kept without its finalizer, got %+v", wl)
				}
			},
		},
		{
			name: "a delete of an orphan already gone is no error",
			objs: []client.Object{workload(orphaned)}, wantDeleted: true,
			fail: []fakeapi.Failure{{Verb: fakeapi.Delete, Kind: "Workload", Err: notFound()}},
			check: func(t *testing.T, c client.Client) {
				if wl := get(t, c); wl == nil || len(wl.Finalizers) != 0 {
					t.Errorf("want the finalizer removed, got %+v", wl)
				}
			},
		},
		{
			name: "a finished workload being deleted goes at once",
			objs: []client.Object{workload(deleting, admitted, finished), running}, wantDeleted: true, check: removed,
		},
	}
}
