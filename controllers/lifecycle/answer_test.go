package lifecycle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: typ + " " + reason}
}

func TestAnswerOf(t *testing.T) {
	tr, fa := metav1.ConditionTrue, metav1.ConditionFalse
	cases := []struct {
		name  string
		conds []metav1.Condition
		want  admission.Answer
	}{
		{"nothing yet", nil, admission.AnswerNone},
		{"accepted only", []metav1.Condition{cond(autoscalingv1.Accepted, tr, "Accepted")}, admission.AnswerNone},
		{"could not check", []metav1.Condition{cond(autoscalingv1.Provisioned, fa, "FailedToCheckCapacity")}, admission.AnswerNone},
		{"no capacity, retried by the autoscaler", []metav1.Condition{cond(autoscalingv1.Accepted, tr, "Accepted"),
			cond(autoscalingv1.Provisioned, fa, CapacityIsNotFound)}, admission.AnswerCapacityNotFound},
		{"provisioned", []metav1.Condition{cond(autoscalingv1.Provisioned, tr, "CapacityIsProvisioned")}, admission.AnswerProvisioned},
		{"failed", []metav1.Condition{cond(autoscalingv1.Provisioned, fa, CapacityIsNotFound), cond(autoscalingv1.Failed, tr, CapacityIsNotFound)}, admission.AnswerFailed},
		{"expired beside provisioned", []metav1.Condition{cond(autoscalingv1.Provisioned, tr, "CapacityIsFound"),
			cond(autoscalingv1.BookingExpired, tr, "CapacityReservationTimeExpired")}, admission.AnswerExpired},
		{"revoked wins", []metav1.Condition{cond(autoscalingv1.Provisioned, tr, "CapacityIsFound"),
			cond(autoscalingv1.BookingExpired, tr, "x"), cond(autoscalingv1.CapacityRevoked, tr, "CapacityRevoked")}, admission.AnswerRevoked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := &autoscalingv1.ProvisioningRequest{Status: autoscalingv1.ProvisioningRequestStatus{Conditions: tc.conds}}
			got, msg := AnswerOf(pr)
			if got != tc.want {
				t.Fatalf("AnswerOf = %d, want %d", got, tc.want)
			}
			if got != admission.AnswerNone && msg == "" {
				t.Fatalf("no message")
			}
		})
	}
}

func TestReportSince(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	first := metav1.NewTime(created.Add(2 * time.Minute))
	now := created.Add(9 * time.Minute)
	wl := &berthv1.Workload{Status: berthv1.WorkloadStatus{Provisioning: &berthv1.ProvisioningStatus{Attempt: 4}}}
	pr := &autoscalingv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}
	if r := Report(wl, pr, now); r.Answer != admission.AnswerNone || r.Since != created.UnixNano() || r.Attempt != 4 {
		t.Fatalf("unanswered: %+v, want since the request's creation", r)
	}
	pr.Status.Conditions = []metav1.Condition{cond(autoscalingv1.Provisioned, metav1.ConditionFalse, CapacityIsNotFound)}
	if r := Report(wl, pr, now); r.Since != now.UnixNano() {
		t.Fatalf("first sighting: since %v, want now", time.Unix(0, r.Since))
	}
	wl.Status.Provisioning.CapacityNotFoundSince = &first
	if r := Report(wl, pr, now); r.Since != first.UnixNano() {
		t.Fatalf("later sighting: since %v, want the recorded %v", time.Unix(0, r.Since), first)
	}
}
