package scheduler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// ReportBooking gives the engine what the autoscaler answered about a
// workload's booking; the next cycle decides what follows.
func (s *Scheduler) ReportBooking(key admission.WorkloadKey, r admission.BookingReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fed, key)
	s.engine.ReportBooking(key, r)
	s.poke()
}

// applyBooking writes one booking decision of the engine.
func (s *Scheduler) applyBooking(ctx context.Context, d admission.BookingDecision) {
	wl, err := s.getWorkload(ctx, d.Key)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logWriteError(ctx, err, "reading workload to decide its booking", d.Key)
			s.undo(d.Key)
		}
		return
	}
	if d.Action == admission.BookingPodsReady {
		s.applyPodsReady(ctx, wl, d)
		return
	}
	done := func(fresh *berthv1.Workload) bool {
		p := fresh.Status.Provisioning
		return p != nil && p.Attempt == d.Attempt && p.State == lifecycle.BookingStateToAPI(d.State)
	}
	var class berthv1.ProvisioningClass
	if p := wl.Status.Provisioning; p != nil {
		class = p.ClassName
	}
	s.commit(ctx, wl, decision{key: d.Key, transition: lifecycle.BookingTransition(d), done: done, what: "booking decision",
		onWritten: func(fresh *berthv1.Workload) { s.booked(d, fresh, class) }, undo: func() { s.undo(d.Key) }})
}

// booked records what a written booking decision did: its event, and the
// outcome's metrics.
func (s *Scheduler) booked(d admission.BookingDecision, wl *berthv1.Workload, class berthv1.ProvisioningClass) {
	s.opts.Metrics.ProvisioningOutcome(string(class), string(d.State))
	msg := ""
	if p := wl.Status.Provisioning; p != nil {
		msg = p.Message
	}
	switch {
	case d.Action == admission.BookingStart:
		// The wait is observed when the engine sees the booking provisioned
		// (UpsertWorkload), however it got there.
		s.recorder.Eventf(wl, nil, corev1.EventTypeNormal, lifecycle.EventProvisioned, "Provision", "%s", msg)
	case d.Action == admission.BookingEvict:
		reason := map[admission.BookingState]string{admission.BookingRevoked: lifecycle.EventCapacityRevoked,
			admission.BookingPodsNotReady: lifecycle.EventPodsNotReady}[d.State]
		if reason == "" {
			reason = lifecycle.EventBookingExpired
		}
		s.opts.Metrics.Queues.Evicted(clusterQueueOf(wl), string(lifecycle.EvictReason(d.State)))
		s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, reason, "Evict", "%s", msg)
	case d.GaveUp:
		s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, lifecycle.EventProvisioningGaveUp, "Provision", "%s", msg)
	default:
		s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, lifecycle.EventProvisioningFailed, "Provision", "%s", msg)
	}
}

// applyPodsReady records that every pod of a gang started on booked
// capacity was Ready by its deadline, as the engine decided: no event, no
// outcome (the booking's outcome was counted when it was provisioned).
func (s *Scheduler) applyPodsReady(ctx context.Context, wl *berthv1.Workload, d admission.BookingDecision) {
	var total int32
	for _, ps := range wl.Spec.PodSets {
		total += ps.Count
	}
	done := func(fresh *berthv1.Workload) bool {
		return meta.IsStatusConditionTrue(fresh.Status.Conditions, berthv1.ConditionPodsReady)
	}
	s.commit(ctx, wl, decision{key: d.Key, transition: lifecycle.PodsReady{Total: total}, done: done, what: "pods-ready decision",
		onWritten: func(*berthv1.Workload) {}, undo: func() { s.undo(d.Key) }})
}
