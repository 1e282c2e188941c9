package scheduler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
)

// applyAdmission persists one admission; if it cannot, the engine forgets it.
func (s *Scheduler) applyAdmission(ctx context.Context, a admission.Admitted) {
	wl, err := s.getWorkload(ctx, a.Key)
	if apierrors.IsNotFound(err) {
		s.DeleteWorkload(a.Key)
		return
	}
	if err != nil {
		s.rollback(a.Key)
		logWriteError(ctx, err, "reading workload to admit", a.Key)
		return
	}
	t, apiAdmission := lifecycle.AdmissionTransition(a.Admission)
	done := func(fresh *berthv1.Workload) bool {
		return equality.Semantic.DeepEqual(fresh.Status.Admission, apiAdmission)
	}
	s.commit(ctx, wl, decision{key: a.Key, transition: t, done: done, what: "admission",
		onWritten: func(fresh *berthv1.Workload) { s.admitted(a, fresh) }, undo: func() { s.rollback(a.Key) }})
}

// admitted records that admission a is in the API server, as wl.
func (s *Scheduler) admitted(a admission.Admitted, wl *berthv1.Workload) {
	s.mu.Lock()
	if _, ok := s.assumed[a.Key]; ok {
		s.assumed[a.Key] = wl.ResourceVersion
	}
	s.mu.Unlock()
	// No event: the Admitted condition records it, and the job adapter's
	// Started event tells the job's owner; an event per admission would
	// double the writes of a deep backlog.
	s.opts.Metrics.Admission(metrics.ResultAdmitted)
	s.opts.Metrics.Queues.Admitted(a.Admission.ClusterQueue)
	if a.Admission.Provisioning == nil {
		s.opts.Metrics.ObserveAdmissionWait(a.Admission.ClusterQueue, metrics.PathExisting, s.now().Sub(wl.CreationTimestamp.Time))
	}
}

// rollback returns an admission the API server did not take to pending.
func (s *Scheduler) rollback(key admission.WorkloadKey) {
	s.mu.Lock()
	delete(s.assumed, key)
	delete(s.fed, key)
	s.engine.Rollback(key)
	s.mu.Unlock()
	s.opts.Metrics.Admission(metrics.ResultRolledBack)
	s.retryLater()
}

// undo gives a decision other than an admission back to the engine, to be
// decided again.
func (s *Scheduler) undo(key admission.WorkloadKey) {
	s.mu.Lock()
	delete(s.fed, key)
	s.engine.Rollback(key)
	s.mu.Unlock()
	s.retryLater()
}

// applyPreemption evicts a victim: a started gang is stopped by its job
// adapter, which releases the quota once the pods are gone; a gang still
// waiting for capacity releases it at once.
func (s *Scheduler) applyPreemption(ctx context.Context, p admission.Preemption) {
	if s.evictRecord(ctx, p.Victim, "preempted") {
		s.opts.Metrics.Preemption(string(p.Reason))
		return
	}
	wl, err := s.getWorkload(ctx, p.Victim)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logWriteError(ctx, err, "reading workload to preempt", p.Victim)
			s.undo(p.Victim)
		}
		return
	}
	t := lifecycle.PreemptionTransition(p)
	msg := t.Message
	// Read before the write: a victim still booking capacity loses its
	// admission with the eviction.
	cq := clusterQueueOf(wl)
	done := func(fresh *berthv1.Workload) bool {
		c := lifecycle.Condition(fresh, berthv1.ConditionEvicted)
		return c != nil && c.Status == "True" && c.Reason == string(berthv1.ReasonPreempted) && c.Message == msg
	}
	// Undone, the engine stops holding the victim's quota for the
	// preemptor: the victim is not going.
	s.commit(ctx, wl, decision{key: p.Victim, transition: t, done: done,
		what: "preemption", onWritten: func(*berthv1.Workload) { s.preempted(p, cq) }, undo: func() { s.undo(p.Victim) }})
}

// preempted counts a written preemption. It records no event: the
// Workload's Evicted condition says why, and the job's Stopped event,
// written when its adapter stops it, carries the same message to the job's
// owner; an event per victim would be one more write per preemption.
func (s *Scheduler) preempted(p admission.Preemption, clusterQueue string) {
	s.opts.Metrics.Preemption(string(p.Reason))
	s.opts.Metrics.Queues.Evicted(clusterQueue, string(berthv1.ReasonPreempted))
}

// applyPending writes why a workload waits, when that changed. The
// Workload and its job are its namespace's to read: the message names no
// workload of another namespace (RedactedMessage).
func (s *Scheduler) applyPending(ctx context.Context, p admission.PendingUpdate) {
	wl, err := s.getWorkload(ctx, p.Key)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logWriteError(ctx, err, "reading pending workload", p.Key)
		}
		return
	}
	msg := p.RedactedMessage()
	written, err := s.writer.Write(ctx, wl, lifecycle.Queue{Reason: lifecycle.ReasonOf(p.Reason), Message: msg})
	if err != nil {
		logWriteError(ctx, err, "writing pending reason", p.Key)
		return
	}
	if written {
		s.opts.Metrics.PendingStatusWrite()
		s.mu.Lock()
		s.pending.wrote(p)
		s.mu.Unlock()
		switch {
		case p.Reason.Unqueueable():
			// Told on the job too: its owner may never look at the Workload.
			s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, lifecycle.EventUnqueueable, "Queue", msg)
			if owner := lifecycle.OwnerOf(wl); owner != nil {
				s.recorder.Eventf(owner, wl, corev1.EventTypeWarning, lifecycle.EventUnqueueable, "Queue", msg)
			}
		case actionable(p.Reason):
			s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, lifecycle.EventInadmissible, "Queue", msg)
		}
	}
}

// clusterQueueOf is the ClusterQueue that admitted wl ("" if none did).
func clusterQueueOf(wl *berthv1.Workload) string {
	if wl.Status.Admission == nil {
		return ""
	}
	return wl.Status.Admission.ClusterQueue
}
