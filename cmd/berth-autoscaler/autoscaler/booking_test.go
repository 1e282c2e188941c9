package autoscaler

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

func TestPlacementRoundTrip(t *testing.T) {
	p := Placement{"n2": {0: 1}, "n1": {1: 2, 0: 3}}
	s := p.String()
	if s != "n1:0:3,n1:1:2,n2:0:1" {
		t.Fatalf("String() = %q", s)
	}
	back, err := ParsePlacement(s)
	if err != nil || !reflect.DeepEqual(back, p) {
		t.Fatalf("ParsePlacement = %v, %v", back, err)
	}
	for _, bad := range []string{"n1:0", "n1:x:1", "n1:0:-1"} {
		if _, err := ParsePlacement(bad); err == nil {
			t.Errorf("ParsePlacement(%q) accepted", bad)
		}
	}
}

func TestConsume(t *testing.T) {
	cases := []struct {
		name    string
		boundTo []string
		want    string
	}{
		{"nothing bound", nil, "n1:0:2,n2:0:1"},
		{"bound where booked", []string{"n2"}, "n1:0:2"},
		{"bound elsewhere takes from the first node", []string{"other"}, "n1:0:1,n2:0:1"},
		{"more bound than booked", []string{"n1", "n1", "n1", "n2"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Placement{"n1": {0: 2}, "n2": {0: 1}}
			p.Consume(tc.boundTo)
			if got := p.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBooked(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ttl := 10 * time.Minute
	req := func(conds []metav1.Condition, details map[string]autoscalingv1.Detail) *autoscalingv1.ProvisioningRequest {
		pr := &autoscalingv1.ProvisioningRequest{}
		pr.Status.Conditions = conds
		pr.Status.ProvisioningClassDetails = details
		return pr
	}
	provisioned := func(at time.Time) []metav1.Condition {
		return []metav1.Condition{{Type: autoscalingv1.Provisioned, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	}
	placed := map[string]autoscalingv1.Detail{DetailPlacement: "n1:0:2"}
	cases := []struct {
		name  string
		pr    *autoscalingv1.ProvisioningRequest
		phase Phase
		want  string
	}{
		{"new books nothing", req(nil, nil), PhaseNew, ""},
		{"a scale-up whose nodes are still coming books its plan", req(provisioned(now), map[string]autoscalingv1.Detail{DetailPlacement: "n1:0:2", DetailScaleUpStarted: "x"}), PhaseProvisioned, "n1:0:2"},
		{"provisioned books until the TTL", req(provisioned(now.Add(-ttl+time.Second)), placed), PhaseProvisioned, "n1:0:2"},
		{"expired by time books nothing", req(provisioned(now.Add(-ttl)), placed), PhaseProvisioned, ""},
		{"consumed books nothing and waits to expire", req(provisioned(now), map[string]autoscalingv1.Detail{DetailPlacement: "n1:0:2", DetailConsumed: "true"}), PhaseProvisioned, ""},
		{"expired books nothing", req(append(provisioned(now), metav1.Condition{Type: autoscalingv1.BookingExpired, Status: metav1.ConditionTrue}), placed), PhaseDone, ""},
		{"revoked books nothing", req(append(provisioned(now), metav1.Condition{Type: autoscalingv1.CapacityRevoked, Status: metav1.ConditionTrue}), placed), PhaseDone, ""},
		{"failed books nothing", req([]metav1.Condition{{Type: autoscalingv1.Failed, Status: metav1.ConditionTrue}}, placed), PhaseDone, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PhaseOf(tc.pr); got != tc.phase {
				t.Errorf("PhaseOf = %v, want %v", got, tc.phase)
			}
			if got := Booked(tc.pr, nil, now, ttl).String(); got != tc.want {
				t.Errorf("Booked = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRetryBackoff(t *testing.T) {
	o := DefaultOptions()
	var got []time.Duration
	for i := range 6 {
		got = append(got, o.Backoff(i))
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("backoffs %v, want cluster-autoscaler's %v", got, want)
	}
}

func TestRevocationNeedsTheFlag(t *testing.T) {
	pr := &autoscalingv1.ProvisioningRequest{}
	pr.Annotations = map[string]string{RevokeAnnotation: "true"}
	if (&RequestReconciler{Options: DefaultOptions()}).revoke(pr) {
		t.Fatalf("revoked without --allow-revocation: cluster-autoscaler never revokes")
	}
	o := DefaultOptions()
	o.AllowRevocation = true
	if !(&RequestReconciler{Options: o}).revoke(pr) {
		t.Fatalf("not revoked with --allow-revocation")
	}
}
