package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/workloadstatus"
)

// Event reasons the scheduler records on Workloads.
const (
	// EventInadmissible: the workload cannot be admitted until someone
	// changes it or its queue (the message says what).
	EventInadmissible = "Inadmissible"
	// EventPreempted: the workload is evicted to make room.
	EventPreempted = "Preempted"
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
	msg := admissionMessage(a.Admission)
	apiAdmission := AdmissionToAPI(a.Admission)
	written, err := workloadstatus.Patch(ctx, s.client, s.reader, wl, func(w *berthv1.Workload) bool {
		if w.Status.Admission != nil || !w.DeletionTimestamp.IsZero() || workloadstatus.IsFinished(w) {
			return false
		}
		if apiAdmission.Provisioning != nil {
			workloadstatus.ReserveForBooking(w, apiAdmission.DeepCopy(), msg)
		} else {
			workloadstatus.Admit(w, apiAdmission.DeepCopy(), msg)
		}
		return true
	})
	if err != nil || !written {
		s.rollback(a.Key)
		if err != nil {
			logWriteError(ctx, err, "writing admission", a.Key)
		} else {
			// The workload moved on (admitted, finished or deleted since
			// the cache was read): let the engine see its real state.
			_ = s.Sync(ctx, wl)
		}
		return
	}
	s.mu.Lock()
	if _, ok := s.assumed[a.Key]; ok {
		s.assumed[a.Key] = wl.ResourceVersion
	}
	s.mu.Unlock()
	// No event: the Admitted condition records it, and the job adapter's
	// Started event tells the job's owner; an event per admission would
	// double the writes of a deep backlog.
	s.opts.Metrics.Admission(metrics.ResultAdmitted)
	if apiAdmission.Provisioning == nil {
		s.opts.Metrics.ObserveAdmissionWait(a.Admission.ClusterQueue, metrics.PathExisting, s.opts.Now().Sub(wl.CreationTimestamp.Time))
	}
}

// rollback returns an admission the API server did not take to pending.
func (s *Scheduler) rollback(key admission.WorkloadKey) {
	s.mu.Lock()
	delete(s.assumed, key)
	s.engine.Rollback(key)
	s.mu.Unlock()
	s.opts.Metrics.Admission(metrics.ResultRolledBack)
	s.retryLater()
}

// applyPreemption marks a victim Evicted; its job adapter stops the job and
// releases the quota once the pods are gone.
func (s *Scheduler) applyPreemption(ctx context.Context, p admission.Preemption) {
	wl, err := s.getWorkload(ctx, p.Victim)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logWriteError(ctx, err, "reading workload to preempt", p.Victim)
			s.retryLater()
		}
		return
	}
	msg := fmt.Sprintf("preempted to admit %s/%s: %s", p.Preemptor.Namespace, p.Preemptor.Name, p.Message)
	written, err := workloadstatus.Patch(ctx, s.client, s.reader, wl, func(w *berthv1.Workload) bool {
		if !workloadstatus.IsAdmitted(w) {
			return false
		}
		return workloadstatus.SetCondition(w, berthv1.ConditionEvicted, metav1.ConditionTrue, berthv1.ReasonPreempted, msg)
	})
	if err != nil {
		// The engine holds the victim's quota for the preemptor until the
		// victim is gone; since it is not going, give it back.
		s.mu.Lock()
		s.engine.Rollback(p.Victim)
		s.mu.Unlock()
		logWriteError(ctx, err, "writing preemption", p.Victim)
		s.retryLater()
		return
	}
	if written {
		s.opts.Metrics.Preemption(string(p.Reason))
		s.recorder.Eventf(wl, nil, corev1.EventTypeNormal, EventPreempted, "Preempt", msg)
	}
}

// applyPending writes why a workload waits, when that changed.
func (s *Scheduler) applyPending(ctx context.Context, p admission.PendingUpdate) {
	wl, err := s.getWorkload(ctx, p.Key)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logWriteError(ctx, err, "reading pending workload", p.Key)
		}
		return
	}
	written, err := workloadstatus.Patch(ctx, s.client, s.reader, wl, func(w *berthv1.Workload) bool {
		if w.Status.Admission != nil || workloadstatus.IsFinished(w) {
			return false
		}
		return SetPending(w, string(p.Reason), p.Message)
	})
	if err != nil {
		logWriteError(ctx, err, "writing pending reason", p.Key)
		return
	}
	if written {
		s.opts.Metrics.PendingStatusWrite()
		s.mu.Lock()
		s.pending.wrote(p)
		s.mu.Unlock()
		if actionable(p.Reason) {
			s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, EventInadmissible, "Queue", p.Message)
		}
	}
}

// SetPending records why a workload waits. Only the QuotaReserved condition
// carries the reason; Admitted=False just says it waits.
func SetPending(wl *berthv1.Workload, reason, message string) bool {
	changed := workloadstatus.SetCondition(wl, berthv1.ConditionQuotaReserved, metav1.ConditionFalse, reason, message)
	if workloadstatus.SetCondition(wl, berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonPending, "waiting for quota") {
		changed = true
	}
	return changed
}

// admissionMessage describes an admission for conditions and events, e.g.
// "admitted by ClusterQueue team-a: nvidia.com/gpu in h200".
func admissionMessage(a admission.Admission) string {
	seen := map[string]bool{}
	var parts []string
	for _, ps := range a.PodSets {
		for r, f := range ps.Flavors {
			p := fmt.Sprintf("%s in %s", r, f)
			if !seen[p] {
				seen[p] = true
				parts = append(parts, p)
			}
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return fmt.Sprintf("admitted by ClusterQueue %s", a.ClusterQueue)
	}
	return fmt.Sprintf("admitted by ClusterQueue %s: %s", a.ClusterQueue, strings.Join(parts, ", "))
}
