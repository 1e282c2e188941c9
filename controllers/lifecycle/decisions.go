package lifecycle

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// The engine's decisions in the lifecycle's terms: each engine decision
// becomes the one transition that writes it.

// EvictReason is the Evicted reason of a started gang whose booking ended
// in state.
func EvictReason(state admission.BookingState) berthv1.WorkloadReason {
	switch state {
	case admission.BookingRevoked:
		return berthv1.ReasonCapacityRevoked
	case admission.BookingPodsNotReady:
		return berthv1.ReasonPodsNotReady
	}
	return berthv1.ReasonBookingExpired
}

// BookingTransition is the transition that writes a booking decision.
func BookingTransition(d admission.BookingDecision) Transition {
	if d.Action == admission.BookingStart {
		t := Provision{Attempt: d.Attempt, Failures: d.Failures, Detail: d.Detail}
		if d.Topology != nil {
			pin := AssignmentToAPI(*d.Topology)
			t.Pin = &pin
		}
		return t
	}
	f := BookingFailure{Attempt: d.Attempt, State: BookingStateToAPI(d.State), Failures: d.Failures,
		MaxAttempts: d.MaxAttempts, GaveUp: d.GaveUp, Detail: d.Detail}
	for _, fd := range d.FailedDomains {
		f.FailedDomains = append(f.FailedDomains, AssignmentToAPI(fd))
	}
	if d.RetryAfter != 0 {
		t := metav1.NewTime(time.Unix(0, d.RetryAfter).Truncate(time.Second))
		f.RetryAfter = &t
	}
	if d.Action == admission.BookingEvict {
		return Evict{Reason: EvictReason(d.State), Booking: &f}
	}
	return FailBooking{Failure: f}
}

// AdmissionTransition is the transition that writes an engine admission,
// and the admission in its API form: Admit, or Reserve when the admission
// books capacity first.
func AdmissionTransition(a admission.Admission) (Transition, *berthv1.Admission) {
	apiAdmission := AdmissionToAPI(a)
	msg := admissionMessage(a)
	if p := a.Provisioning; p != nil {
		return Reserve{Admission: apiAdmission, Generation: a.Generation, Attempt: p.Attempt,
			Flavor: p.Flavor, MaxAttempts: p.MaxAttempts, Message: msg}, apiAdmission
	}
	return Admit{Admission: apiAdmission, Generation: a.Generation, Message: msg}, apiAdmission
}

// EvictionTransition is the transition that writes an engine eviction
// (a drain, a deactivation, a changed job).
func EvictionTransition(ev admission.Eviction) Evict {
	return Evict{Reason: evictionReasons[ev.Reason], Message: ev.Message}
}

// PreemptionTransition is the transition that evicts a preemption's victim.
// Its message is the victim's namespace's to read, so a preemptor of another
// namespace is not named (admission.Redact).
func PreemptionTransition(p admission.Preemption) Evict {
	msg := fmt.Sprintf("preempted to admit %s: %s", admission.Shown(p.Preemptor, p.Victim.Namespace), p.RedactedMessage())
	return Evict{Reason: berthv1.ReasonPreempted, Message: msg}
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
