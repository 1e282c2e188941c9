package lifecycle

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// maxMessage is the longest condition or provisioning message the API
// accepts.
const maxMessage = 1024

// why is the reason and message a transition gives its phase's leading
// condition: QuotaReserved's for a waiting workload, Admitted's otherwise.
type why struct {
	reason  berthv1.WorkloadReason
	message string
}

// derive sets QuotaReserved and Admitted from the phase the workload is in
// after a transition. Evicted and PodsReady are facts about an eviction
// or a gang, set by the transitions that establish them.
func derive(wl *berthv1.Workload, w why, now metav1.Time) {
	switch phase := PhaseOf(wl); phase {
	case Pending, GaveUp:
		admitted := berthv1.ReasonPending
		switch w.reason {
		case berthv1.ReasonPending:
			if c := Condition(wl, berthv1.ConditionEvicted); c != nil && c.Status == metav1.ConditionTrue {
				admitted = berthv1.ReasonRequeued
			}
		case berthv1.ReasonProvisioningFailed, berthv1.ReasonProvisioningGaveUp:
			admitted = w.reason
		}
		msg := w.message
		if admitted == berthv1.ReasonPending && w.reason != berthv1.ReasonPending {
			msg = "waiting for quota"
		}
		set(wl, berthv1.ConditionQuotaReserved, metav1.ConditionFalse, w.reason, w.message, now)
		set(wl, berthv1.ConditionAdmitted, metav1.ConditionFalse, admitted, msg, now)
	case Reserved:
		set(wl, berthv1.ConditionQuotaReserved, metav1.ConditionTrue, berthv1.ReasonQuotaReserved, quotaMessage(wl), now)
		set(wl, berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonWaitingForCapacity, w.message, now)
	case Admitted, Running:
		set(wl, berthv1.ConditionQuotaReserved, metav1.ConditionTrue, berthv1.ReasonQuotaReserved, quotaMessage(wl), now)
		set(wl, berthv1.ConditionAdmitted, metav1.ConditionTrue, berthv1.ReasonAdmitted, w.message, now)
	case Evicting:
		set(wl, berthv1.ConditionQuotaReserved, metav1.ConditionTrue, berthv1.ReasonQuotaReserved, quotaMessage(wl), now)
		set(wl, berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonEvicted, w.message, now)
	}
}

// quotaMessage keeps the message QuotaReserved got when quota was
// reserved.
func quotaMessage(wl *berthv1.Workload) string {
	if c := Condition(wl, berthv1.ConditionQuotaReserved); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	return "quota reserved in ClusterQueue " + wl.Status.Admission.ClusterQueue
}

// set sets a condition; its transition time moves only when its status
// does.
func set(wl *berthv1.Workload, t string, status metav1.ConditionStatus, reason berthv1.WorkloadReason, msg string, now metav1.Time) {
	meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: string(reason), Message: truncate(msg),
		ObservedGeneration: wl.Generation, LastTransitionTime: now,
	})
}

// clearEviction records, on a workload evicted before, that it holds quota
// again.
func clearEviction(wl *berthv1.Workload, reason berthv1.WorkloadReason, msg string, now metav1.Time) {
	if Condition(wl, berthv1.ConditionEvicted) != nil {
		set(wl, berthv1.ConditionEvicted, metav1.ConditionFalse, reason, msg, now)
	}
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}

// removePodsReady forgets whether an earlier admission's pods were Ready.
func removePodsReady(wl *berthv1.Workload) {
	meta.RemoveStatusCondition(&wl.Status.Conditions, berthv1.ConditionPodsReady)
}
