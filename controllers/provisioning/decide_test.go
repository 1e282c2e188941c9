package provisioning

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func withConditions(types ...string) *autoscalingv1.ProvisioningRequest {
	pr := &autoscalingv1.ProvisioningRequest{}
	for _, typ := range types {
		pr.Status.Conditions = append(pr.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "R", Message: typ + " message"})
	}
	return pr
}

func TestOutcomeOf(t *testing.T) {
	cases := []struct {
		conds []string
		want  Outcome
	}{
		{nil, Waiting},
		{[]string{autoscalingv1.Accepted}, Waiting},
		{[]string{autoscalingv1.Accepted, autoscalingv1.Provisioned}, Provisioned},
		{[]string{autoscalingv1.Accepted, autoscalingv1.Failed}, Failed},
		{[]string{autoscalingv1.Provisioned, autoscalingv1.BookingExpired}, BookingExpired},
		{[]string{autoscalingv1.Provisioned, autoscalingv1.CapacityRevoked}, Revoked},
	}
	for _, tc := range cases {
		got, msg := OutcomeOf(withConditions(tc.conds...))
		if got != tc.want {
			t.Errorf("OutcomeOf(%v) = %d, want %d", tc.conds, got, tc.want)
		}
		if got != Waiting && msg == "" {
			t.Errorf("OutcomeOf(%v): no message", tc.conds)
		}
	}
	// A condition that is not True does not count.
	pr := &autoscalingv1.ProvisioningRequest{Status: autoscalingv1.ProvisioningRequestStatus{Conditions: []metav1.Condition{{Type: autoscalingv1.Provisioned, Status: metav1.ConditionFalse}}}}
	if got, _ := OutcomeOf(pr); got != Waiting {
		t.Errorf("Provisioned=False: %d", got)
	}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name                       string
		out                        Outcome
		booking, started, consumed bool
		want                       Action
	}{
		{"booking, no answer", Waiting, true, false, false, Action{}},
		{"booking, provisioned", Provisioned, true, false, false, Action{Kind: Admit}},
		{"booking, failed", Failed, true, false, false, Action{Kind: Fail, State: berthv1.ProvisioningFailed}},
		{"booking, expired", BookingExpired, true, false, false, Action{Kind: Fail, State: berthv1.ProvisioningBookingExpired}},
		{"booking, revoked", Revoked, true, false, false, Action{Kind: Fail, State: berthv1.ProvisioningCapacityRevoked}},
		{"started, provisioned", Provisioned, false, true, true, Action{}},
		{"started, revoked", Revoked, false, true, true, Action{Kind: Evict, State: berthv1.ProvisioningCapacityRevoked, Reason: berthv1.ReasonCapacityRevoked}},
		{"started, expired unused", BookingExpired, false, true, false, Action{Kind: Fail, State: berthv1.ProvisioningBookingExpired}},
		{"started, expired after use", BookingExpired, false, true, true, Action{}},
		{"neither", Failed, false, false, false, Action{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.out, tc.booking, tc.started, tc.consumed); got != tc.want {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFailure(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rack := &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"rack"}, Values: []string{"r1"}}
	pol := &berthv1.ProvisioningPolicy{MaxAttempts: 3, BackoffSeconds: 10}
	cases := []struct {
		name       string
		attempt    int32
		started    bool
		wantGaveUp bool
		wantRetry  time.Duration
	}{
		{"first attempt, not started", 1, false, false, 10 * time.Second},
		{"second attempt, not started", 2, false, false, 20 * time.Second},
		{"last attempt", 3, false, true, 0},
		{"started job", 1, true, false, 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl := bookingWorkload(rack)
			wl.Status.Provisioning.Attempt = tc.attempt
			wl.Status.Provisioning.FailedDomains = []berthv1.TopologyAssignment{*rack}
			if tc.started {
				SetCondition(wl, berthv1.ConditionAdmitted, metav1.ConditionTrue, berthv1.ReasonAdmitted, "", now)
			}
			msg, gaveUp := Failure(wl, berthv1.ProvisioningFailed, "pool rack-a is out of stock", pol, now)
			p := wl.Status.Provisioning
			if gaveUp != tc.wantGaveUp || p.GaveUp != tc.wantGaveUp {
				t.Errorf("gaveUp %v/%v, want %v", gaveUp, p.GaveUp, tc.wantGaveUp)
			}
			if p.State != berthv1.ProvisioningFailed || len(p.FailedDomains) != 1 {
				t.Errorf("state %s, failed domains %v: want Failed and the rack once", p.State, p.FailedDomains)
			}
			switch {
			case tc.wantGaveUp && (p.RetryAfter != nil || !strings.Contains(msg, "delete Workload")):
				t.Errorf("gave up: retryAfter %v, message %q", p.RetryAfter, msg)
			case !tc.wantGaveUp && (p.RetryAfter == nil || !p.RetryAfter.Time.Equal(now.Add(tc.wantRetry))):
				t.Errorf("retryAfter %v, want now+%s", p.RetryAfter, tc.wantRetry)
			}
			for _, part := range []string{"rack=r1", "out of stock", "attempt", autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q lacks %q", msg, part)
				}
			}
			if tc.started {
				if wl.Status.Admission == nil || !meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionEvicted) {
					t.Errorf("started job: want the admission kept and Evicted=True")
				}
				return
			}
			qr := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved)
			if wl.Status.Admission != nil || qr == nil || qr.Status != metav1.ConditionFalse || qr.Reason != berthv1.ReasonProvisioningFailed {
				t.Errorf("admission %v, QuotaReserved %v: want released with ProvisioningFailed", wl.Status.Admission, qr)
			}
		})
	}
}

func TestAdmissionAndEviction(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	wl := bookingWorkload(nil)
	SetCondition(wl, berthv1.ConditionEvicted, metav1.ConditionTrue, berthv1.ReasonRequeued, "", now)
	Admission(wl, "provisioned", now)
	if wl.Status.Admission.Provisioning != nil || wl.Status.Provisioning.State != berthv1.ProvisioningProvisioned {
		t.Errorf("admission provisioning %v, state %s", wl.Status.Admission.Provisioning, wl.Status.Provisioning.State)
	}
	if !meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted) || meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionEvicted) {
		t.Errorf("conditions %v: want Admitted, not Evicted", wl.Status.Conditions)
	}
	msg := Eviction(wl, berthv1.ProvisioningCapacityRevoked, berthv1.ReasonCapacityRevoked, "revoked", &berthv1.ProvisioningPolicy{BackoffSeconds: 7}, now)
	ev := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionEvicted)
	if ev == nil || ev.Status != metav1.ConditionTrue || ev.Reason != berthv1.ReasonCapacityRevoked || ev.Message != msg {
		t.Errorf("Evicted %v", ev)
	}
	// Attempt 2: 7s doubled once.
	if p := wl.Status.Provisioning; p.State != berthv1.ProvisioningCapacityRevoked || !p.RetryAfter.Time.Equal(now.Add(14*time.Second)) {
		t.Errorf("state %s retryAfter %v", p.State, p.RetryAfter)
	}
}

func TestPodsReadyDeadline(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		pol  *berthv1.ProvisioningPolicy
		want time.Time
	}{
		{nil, time.Time{}},
		{&berthv1.ProvisioningPolicy{PodsReadySeconds: 0}, time.Time{}},
		{&berthv1.ProvisioningPolicy{PodsReadySeconds: 60}, at.Add(time.Minute)},
	}
	for _, tc := range cases {
		if got := PodsReadyDeadline(tc.pol, at); !got.Equal(tc.want) {
			t.Errorf("PodsReadyDeadline(%v) = %s, want %s", tc.pol, got, tc.want)
		}
	}
}
