package jobs

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/lifecycle/persist"
)

// EventFinishedPodsRunning is a job whose status says it ended while pods
// of its Workload still run: the Workload keeps its quota until they end.
const EventFinishedPodsRunning = "FinishedPodsRunning"

// finishJob records that a job ended, which releases its quota, once no pod
// of its Workload runs any more. A job's status can say it ended while its
// pods still run and hold their nodes: a PyTorchJob or MPIJob whose master
// succeeded leaves its workers running (cleanPodPolicy None), a RayJob's
// cluster outlives it for its ttlSecondsAfterFinished, a JobSet is Completed
// or Failed while its child Jobs' pods run out their grace period. The pods
// themselves decide, as for an evicted job (stop). A job that finished
// before it was admitted holds no quota and finishes at once.
func (r *Reconciler) finishJob(ctx context.Context, job GenericJob, wl *berthv1.Workload, succeeded bool, msg string) (reconcile.Result, error) {
	if lifecycle.IsFinished(wl) {
		r.finishing.forget(wl)
		return reconcile.Result{}, nil
	}
	if lifecycle.HoldsQuota(lifecycle.PhaseOf(wl)) {
		n, err := persist.PodsRunning(ctx, r.reader, wl)
		if err != nil {
			return reconcile.Result{}, err
		}
		if n > 0 {
			err := r.holdFinished(ctx, job, wl, n)
			return reconcile.Result{RequeueAfter: r.finishing.poll(wl)}, err
		}
	}
	// Its pods are gone: the group they were scheduled as goes with them.
	if err := r.dropPodGroup(ctx, job, wl, true); err != nil {
		return reconcile.Result{}, err
	}
	r.finishing.forget(wl)
	return reconcile.Result{}, r.finish(ctx, wl, succeeded, msg)
}

// holdFinished keeps the quota of a finished job whose pods still run and
// says why, in an event the first time only: the job is looked at again
// until its pods end (finishingWorkloads.poll). Its Workload keeps berth's finalizer
// meanwhile, as any Workload that holds quota does (restoreFinalizer).
func (r *Reconciler) holdFinished(ctx context.Context, job GenericJob, wl *berthv1.Workload, running int) error {
	log.FromContext(ctx).V(1).Info("keeping the quota of a finished job while its pods run", "workload", wl.Name, "pods", running)
	if r.finishing.first(wl) {
		r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, EventFinishedPodsRunning, "Finish",
			"the job ended but %d of its pods still run: workload %s keeps its quota until they end", running, wl.Name)
	}
	_, err := r.restoreFinalizer(ctx, job, wl)
	return err
}

// finish records that the job ended, which releases its quota.
func (r *Reconciler) finish(ctx context.Context, wl *berthv1.Workload, succeeded bool, msg string) error {
	_, err := r.writer.Write(ctx, wl, lifecycle.Finish{Succeeded: succeeded, Message: msg})
	return err
}

// finishingWorkloads are the Workloads of finished jobs whose pods still
// run that were reported already, by key and UID (a Workload created again
// under the same name is reported again), with how often they were polled.
type finishingWorkloads struct {
	mu sync.Mutex
	m  map[types.NamespacedName]finishing
}

// finishing is a reported Workload and the polls since.
type finishing struct {
	uid   types.UID
	polls int
}

// maxFinishedPoll bounds the wait between two looks at a finished job's
// pods. Pods a finished job leaves usually end within seconds (a JobSet's
// child Jobs, a RayJob's cluster at its TTL); the workers a PyTorchJob's
// cleanPodPolicy None leaves may run for days, and each look lists pods
// from the API server, so the wait doubles from podsPoll up to this.
const maxFinishedPoll = time.Minute

// first reports whether wl was not reported yet, and records it.
func (f *finishingWorkloads) first(wl *berthv1.Workload) bool {
	key := client.ObjectKeyFromObject(wl)
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.m[key]; ok && e.uid == wl.UID {
		return false
	}
	if f.m == nil {
		f.m = map[types.NamespacedName]finishing{}
	}
	f.m[key] = finishing{uid: wl.UID}
	return true
}

// poll is how long to wait before the next look at wl's pods: podsPoll,
// doubled at each look since it was reported, up to maxFinishedPoll.
func (f *finishingWorkloads) poll(wl *berthv1.Workload) time.Duration {
	key := client.ObjectKeyFromObject(wl)
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.m[key]
	if !ok || e.uid != wl.UID {
		return podsPoll
	}
	wait := podsPoll << min(e.polls, 5)
	e.polls++
	f.m[key] = e
	return min(wait, maxFinishedPoll)
}

// forget drops the record of wl: its job finished, or it is gone.
func (f *finishingWorkloads) forget(wl *berthv1.Workload) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, client.ObjectKeyFromObject(wl))
}
