package provisioning

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Outcome is what the autoscaler answered to a ProvisioningRequest.
type Outcome int

const (
	// Waiting means no answer yet.
	Waiting Outcome = iota
	// Provisioned means the capacity is booked.
	Provisioned
	// Failed means the autoscaler cannot provide the capacity.
	Failed
	// BookingExpired means the booking lapsed.
	BookingExpired
	// Revoked means the autoscaler took the capacity back.
	Revoked
)

// OutcomeOf reads a request's conditions. The terminal conditions win over
// Provisioned, which stays True beside them.
func OutcomeOf(pr *autoscalingv1.ProvisioningRequest) (Outcome, string) {
	for _, c := range []struct {
		typ string
		out Outcome
	}{
		{autoscalingv1.CapacityRevoked, Revoked},
		{autoscalingv1.Failed, Failed},
		{autoscalingv1.BookingExpired, BookingExpired},
		{autoscalingv1.Provisioned, Provisioned},
	} {
		if cond := meta.FindStatusCondition(pr.Status.Conditions, c.typ); cond != nil && cond.Status == metav1.ConditionTrue {
			return c.out, cond.Message
		}
	}
	return Waiting, ""
}

// ActionKind is what to do with a Workload.
type ActionKind int

const (
	// Nothing to do.
	Nothing ActionKind = iota
	// Admit lets the gang start on the booked capacity.
	Admit
	// Fail gives the booking up: the workload waits for its retry (or, if
	// its job already started, is evicted first).
	Fail
	// Evict stops a started gang and queues it again after a backoff.
	Evict
)

// Action is the decision for one Workload.
type Action struct {
	// Kind of action.
	Kind ActionKind
	// State is the provisioning state to record (Fail, Evict).
	State berthv1.ProvisioningState
	// Reason is the Evicted reason (Evict).
	Reason string
}

// Decide maps a request's outcome to an action on its Workload. booking is
// true while the workload waits for the request (state Pending, quota
// reserved, not admitted); started while it runs on the booking (state
// Provisioned, admitted). consumed reports whether any pod carries the
// request's consume annotation.
func Decide(out Outcome, booking, started, consumed bool) Action {
	switch {
	case booking:
		switch out {
		case Provisioned:
			return Action{Kind: Admit}
		case Failed:
			return Action{Kind: Fail, State: berthv1.ProvisioningFailed}
		case BookingExpired:
			return Action{Kind: Fail, State: berthv1.ProvisioningBookingExpired}
		case Revoked:
			return Action{Kind: Fail, State: berthv1.ProvisioningCapacityRevoked}
		}
	case started:
		switch out {
		case Revoked:
			return Action{Kind: Evict, State: berthv1.ProvisioningCapacityRevoked, Reason: berthv1.ReasonCapacityRevoked}
		case BookingExpired:
			if !consumed {
				return Action{Kind: Fail, State: berthv1.ProvisioningBookingExpired}
			}
		}
	}
	return Action{Kind: Nothing}
}

// Failure records a failed or expired booking on wl: the provisioning state,
// the failed domain, the retry time or that berth gave up. A workload whose
// job started is marked Evicted (its job adapter stops the job, then
// releases the quota); otherwise its admission is released at once. It
// returns the message and whether berth gave up.
func Failure(wl *berthv1.Workload, state berthv1.ProvisioningState, autoscalerMsg string, pol *berthv1.ProvisioningPolicy, now time.Time) (string, bool) {
	p := wl.Status.Provisioning
	p.State = state
	p.FailedDomains = addDomain(p.FailedDomains, p.Topology)
	what := "failed"
	switch state {
	case berthv1.ProvisioningBookingExpired:
		what = "expired before the pods used it"
	case berthv1.ProvisioningCapacityRevoked:
		what = "was revoked"
	}
	if autoscalerMsg == "" {
		autoscalerMsg = "no message from the autoscaler"
	}
	maxAttempts := MaxAttempts(pol)
	msg := fmt.Sprintf("%s booking %s in %s %s: %s; attempt %d of %d", p.ClassName, p.RequestName, DomainString(p.Topology), what, autoscalerMsg, p.Attempt, maxAttempts)
	if p.Attempt >= maxAttempts {
		p.GaveUp, p.RetryAfter = true, nil
		msg += fmt.Sprintf("; no attempt left: delete Workload %s to start over (the job's controller creates a new one), or change the flavor's provisioning policy or capacity first", wl.Name)
	} else {
		retry := metav1.NewTime(now.Add(Backoff(pol, p.Attempt)).Truncate(time.Second))
		p.RetryAfter = &retry
		msg += fmt.Sprintf("; next attempt not before %s", retry.UTC().Format(time.RFC3339))
	}
	msg = truncate(msg, 1024)
	p.Message = msg
	if meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted) {
		SetCondition(wl, berthv1.ConditionEvicted, metav1.ConditionTrue, berthv1.ReasonProvisioningFailed, msg, now)
		return msg, p.GaveUp
	}
	wl.Status.Admission = nil
	SetCondition(wl, berthv1.ConditionQuotaReserved, metav1.ConditionFalse, berthv1.ReasonProvisioningFailed, msg, now)
	SetCondition(wl, berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonProvisioningFailed, msg, now)
	return msg, p.GaveUp
}

// Eviction marks a started workload Evicted with reason, records state (if
// not empty) and a retry time after a backoff.
func Eviction(wl *berthv1.Workload, state berthv1.ProvisioningState, reason, msg string, pol *berthv1.ProvisioningPolicy, now time.Time) string {
	p := wl.Status.Provisioning
	if state != "" {
		p.State = state
	}
	retry := metav1.NewTime(now.Add(Backoff(pol, p.Attempt)).Truncate(time.Second))
	p.RetryAfter = &retry
	msg = truncate(fmt.Sprintf("%s; queued again, next attempt not before %s", msg, retry.UTC().Format(time.RFC3339)), 1024)
	p.Message = msg
	SetCondition(wl, berthv1.ConditionEvicted, metav1.ConditionTrue, reason, msg, now)
	return msg
}

// Admission lets a workload whose capacity is provisioned start: Admitted,
// state Provisioned, and no capacity left to book in its admission (so the
// engine plans it on the nodes that now exist).
func Admission(wl *berthv1.Workload, msg string, now time.Time) {
	p := wl.Status.Provisioning
	p.State, p.Message, p.RetryAfter = berthv1.ProvisioningProvisioned, truncate(msg, 1024), nil
	wl.Status.Admission.Provisioning = nil
	SetCondition(wl, berthv1.ConditionAdmitted, metav1.ConditionTrue, berthv1.ReasonAdmitted, msg, now)
	if meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionEvicted) != nil {
		SetCondition(wl, berthv1.ConditionEvicted, metav1.ConditionFalse, berthv1.ReasonAdmitted, "admitted again after eviction", now)
	}
}

// SetCondition sets a condition with its transition time taken from now
// (when the status changes), and reports whether anything changed.
func SetCondition(wl *berthv1.Workload, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) bool {
	return meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: wl.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// PodsReadyDeadline is when every pod of a gang admitted at admittedAt must
// be Ready; zero when the check is off.
func PodsReadyDeadline(pol *berthv1.ProvisioningPolicy, admittedAt time.Time) time.Time {
	if pol == nil || pol.PodsReadySeconds <= 0 || admittedAt.IsZero() {
		return time.Time{}
	}
	return admittedAt.Add(time.Duration(pol.PodsReadySeconds) * time.Second)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
