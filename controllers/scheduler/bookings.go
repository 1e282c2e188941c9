package scheduler

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// ReportBooking gives the engine what the autoscaler answered about a
// workload's booking; the next cycle decides what follows.
func (s *Scheduler) ReportBooking(key admission.WorkloadKey, r admission.BookingReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engine.ReportBooking(key, r)
	s.poke()
}

// evictReason is the Evicted reason of a started gang whose booking ended
// in state.
func evictReason(state admission.BookingState) berthv1.WorkloadReason {
	switch state {
	case admission.BookingRevoked:
		return berthv1.ReasonCapacityRevoked
	case admission.BookingPodsNotReady:
		return berthv1.ReasonPodsNotReady
	}
	return berthv1.ReasonBookingExpired
}

// BookingTransition is the transition that writes a booking decision.
func BookingTransition(d admission.BookingDecision) lifecycle.Transition {
	if d.Action == admission.BookingStart {
		return lifecycle.Provision{Attempt: d.Attempt, Failures: d.Failures, Detail: d.Detail}
	}
	f := lifecycle.BookingFailure{Attempt: d.Attempt, State: berthv1.ProvisioningState(d.State), Failures: d.Failures,
		MaxAttempts: d.MaxAttempts, GaveUp: d.GaveUp, Detail: d.Detail}
	for _, fd := range d.FailedDomains {
		f.FailedDomains = append(f.FailedDomains, AssignmentToAPI(fd))
	}
	if d.RetryAfter != 0 {
		t := metav1.NewTime(time.Unix(0, d.RetryAfter).Truncate(time.Second))
		f.RetryAfter = &t
	}
	if d.Action == admission.BookingEvict {
		return lifecycle.Evict{Reason: evictReason(d.State), Booking: &f}
	}
	return lifecycle.FailBooking{Failure: f}
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
	done := func(fresh *berthv1.Workload) bool {
		p := fresh.Status.Provisioning
		return p != nil && p.Attempt == d.Attempt && p.State == berthv1.ProvisioningState(d.State)
	}
	class := ""
	if p := wl.Status.Provisioning; p != nil {
		class = p.ClassName
	}
	s.commit(ctx, wl, decision{key: d.Key, transition: BookingTransition(d), done: done, what: "booking decision",
		onWritten: func(fresh *berthv1.Workload) { s.booked(d, fresh, class) }, undo: func() { s.undo(d.Key) }})
}

// booked records what a written booking decision did: its event, and the
// outcome's metrics.
func (s *Scheduler) booked(d admission.BookingDecision, wl *berthv1.Workload, class string) {
	s.opts.Metrics.ProvisioningOutcome(class, string(d.State))
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
		s.opts.Metrics.Queues.Evicted(clusterQueueOf(wl), string(evictReason(d.State)))
		s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, reason, "Evict", "%s", msg)
	case d.GaveUp:
		s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, lifecycle.EventProvisioningGaveUp, "Provision", "%s", msg)
	default:
		s.recorder.Eventf(wl, nil, corev1.EventTypeWarning, lifecycle.EventProvisioningFailed, "Provision", "%s", msg)
	}
}
