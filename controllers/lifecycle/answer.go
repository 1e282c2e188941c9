package lifecycle

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// CapacityIsNotFound is the reason cluster-autoscaler gives Provisioned=False
// when no node group can take a request now; it retries the request on its
// own and never fails it (see docs/provisioning.md).
const CapacityIsNotFound = "CapacityIsNotFound"

// AnswerOf reads what the autoscaler answered to a request: the terminal
// conditions first (Provisioned stays True beside them), then Provisioned.
// A request without an answer, or with Provisioned=False for another reason
// (the autoscaler could not even look), is AnswerNone.
func AnswerOf(pr *autoscalingv1.ProvisioningRequest) (admission.Answer, string) {
	for _, c := range []struct {
		typ    string
		answer admission.Answer
	}{
		{autoscalingv1.CapacityRevoked, admission.AnswerRevoked},
		{autoscalingv1.Failed, admission.AnswerFailed},
		{autoscalingv1.BookingExpired, admission.AnswerExpired},
		{autoscalingv1.Provisioned, admission.AnswerProvisioned},
	} {
		if cond := meta.FindStatusCondition(pr.Status.Conditions, c.typ); cond != nil && cond.Status == metav1.ConditionTrue {
			return c.answer, cond.Message
		}
	}
	if cond := meta.FindStatusCondition(pr.Status.Conditions, autoscalingv1.Provisioned); cond != nil && cond.Reason == CapacityIsNotFound {
		return admission.AnswerCapacityNotFound, cond.Message
	}
	return admission.AnswerNone, ""
}

// Report is the report to the engine of a request's answer for the
// workload's current attempt. The first time the autoscaler found no
// capacity is the one recorded on the Workload (cluster-autoscaler moves its
// condition's transition time at every retry), else now.
func Report(wl *berthv1.Workload, pr *autoscalingv1.ProvisioningRequest, now time.Time) admission.BookingReport {
	p := wl.Status.Provisioning
	answer, msg := AnswerOf(pr)
	r := admission.BookingReport{Attempt: p.Attempt, Answer: answer, Message: msg}
	switch answer {
	case admission.AnswerNone:
		r.Since = pr.CreationTimestamp.UnixNano()
	case admission.AnswerCapacityNotFound:
		r.Since = now.UnixNano()
		if p.CapacityNotFoundSince != nil {
			r.Since = p.CapacityNotFoundSince.UnixNano()
		}
	}
	return r
}
