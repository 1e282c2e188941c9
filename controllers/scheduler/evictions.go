package scheduler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// ReportChange tells the engine that job, the job of an admitted workload,
// changed under its admission (it grew, its template moved, it changed
// before it started, or it can no longer be read as a gang); the next cycle
// evicts it, and this scheduler writes the eviction and tells the job.
func (s *Scheduler) ReportChange(key admission.WorkloadKey, c admission.Change, job runtime.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fed, key)
	s.engine.ReportChange(key, c)
	if job != nil {
		s.jobs[key] = job.DeepCopyObject()
	}
	s.poke()
}

// jobOf is the job a change was reported with, to tell of its eviction;
// the Workload when none was.
func (s *Scheduler) jobOf(wl *berthv1.Workload) (runtime.Object, runtime.Object) {
	s.mu.Lock()
	job, ok := s.jobs[lifecycle.KeyOf(wl)]
	delete(s.jobs, lifecycle.KeyOf(wl))
	s.mu.Unlock()
	if !ok {
		return wl, nil
	}
	return job, wl
}

// applyEviction writes an eviction the engine decided from the facts it was
// fed — a drain, a deactivation, a changed job — the one way every such
// eviction is written: a started gang is then stopped by its job adapter,
// which reacts to the Evicted condition, and the workload is queued again
// once its pods are gone.
func (s *Scheduler) applyEviction(ctx context.Context, ev admission.Eviction) {
	if s.evictRecord(ctx, ev.Key, string(lifecycle.EvictionTransition(ev).Reason)) {
		return
	}
	wl, err := s.getWorkload(ctx, ev.Key)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logWriteError(ctx, err, "reading workload to evict", ev.Key)
			s.undo(ev.Key)
		}
		return
	}
	t := lifecycle.EvictionTransition(ev)
	// Read before the write: a workload still booking capacity loses its
	// admission with the eviction.
	cq := clusterQueueOf(wl)
	done := func(fresh *berthv1.Workload) bool {
		c := lifecycle.Condition(fresh, berthv1.ConditionEvicted)
		return c != nil && c.Status == "True" && c.Reason == string(t.Reason) && c.Message == t.Message
	}
	s.commit(ctx, wl, decision{key: ev.Key, transition: t, done: done, what: "eviction",
		onWritten: func(fresh *berthv1.Workload) { s.evicted(ev, fresh, cq) }, undo: func() { s.undo(ev.Key) }})
}

// evicted counts a written eviction against the ClusterQueue that admitted
// the workload, and tells of it where it is told: a deactivation on the
// Workload, a changed job on the job. A drain is told by its queue's
// condition. A job queued again because it changed is not counted: the
// metric counts evictions of work that would have gone on running.
func (s *Scheduler) evicted(ev admission.Eviction, wl *berthv1.Workload, clusterQueue string) {
	if clusterQueue != "" && ev.Change.Kind == 0 {
		s.opts.Metrics.Queues.Evicted(clusterQueue, string(lifecycle.EvictionTransition(ev).Reason))
	}
	if ev.Reason == admission.EvictDeactivated {
		s.recorder.Eventf(wl, nil, corev1.EventTypeNormal, lifecycle.EventDeactivated, "Evict", ev.Message)
		return
	}
	if ev.Change.Kind == 0 {
		return
	}
	job, related := s.jobOf(wl)
	switch ev.Change.Kind {
	case admission.ChangeGrew:
		s.recorder.Eventf(job, related, corev1.EventTypeNormal, lifecycle.EventResized, "Resize",
			"grew (%s): stopped and queued again for all of its pods", ev.Change.Detail)
	case admission.ChangeMoved:
		s.recorder.Eventf(job, related, corev1.EventTypeNormal, lifecycle.EventResized, "Resize",
			"pod set %s may now run elsewhere: stopped and queued again", ev.Change.Detail)
	case admission.ChangeBeforeStart:
		s.recorder.Eventf(job, related, corev1.EventTypeNormal, lifecycle.EventResized, "Resize", "changed before it started: queued again as it is now")
	case admission.ChangeInvalid:
		s.recorder.Eventf(job, related, corev1.EventTypeWarning, lifecycle.EventStopped, "Stop", "invalid while running: stopped and queued again once valid")
	}
}
