package autoscale

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

const (
	atomic = autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp
	check  = autoscalingv1.ProvisioningClassCheckCapacity
)

func TestDecide(t *testing.T) {
	group := &Option{Group: "a", Nodes: 2}
	stocked := &Option{Group: "a", Nodes: 2, OutOfStock: true}
	for _, tc := range []struct {
		name string
		look Look
		want Outcome
	}{
		{"scale-up fits free capacity", Look{Class: atomic, FitsFree: true, Chosen: group}, Found},
		{"scale-up grows the chosen group", Look{Class: atomic, Chosen: group}, Provisioned},
		{"scale-up with no group holding the rest", Look{Class: atomic}, NotFound},
		{"scale-up whose chosen group is out of stock", Look{Class: atomic, Chosen: stocked}, StockedOut},
		{"noRetry is check-capacity's only", Look{Class: atomic, NoRetry: true}, NotFound},
		{"check-capacity fits", Look{Class: check, FitsFree: true}, Found},
		{"check-capacity never grows a group", Look{Class: check, Chosen: group}, NotFound},
		{"check-capacity with noRetry fails", Look{Class: check, NoRetry: true}, Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.look); got != tc.want {
				t.Errorf("Decide = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		outcome Outcome
		detail  string
		want    metav1.Condition
	}{
		{"found", Found, "", metav1.Condition{Type: autoscalingv1.Provisioned, Status: metav1.ConditionTrue, Reason: ReasonCapacityFound, Message: MsgCapacityFound}},
		{"provisioned", Provisioned, "", metav1.Condition{Type: autoscalingv1.Provisioned, Status: metav1.ConditionTrue, Reason: ReasonProvisioned, Message: MsgCapacityFound}},
		{"not found", NotFound, "pool a: out of stock", metav1.Condition{Type: autoscalingv1.Provisioned, Status: metav1.ConditionFalse, Reason: ReasonCapacityNotFound, Message: MsgCapacityNotFound + " (pool a: out of stock)"}},
		{"stocked out reads as not found", StockedOut, "", metav1.Condition{Type: autoscalingv1.Provisioned, Status: metav1.ConditionFalse, Reason: ReasonCapacityNotFound, Message: MsgCapacityNotFound}},
		{"failed", Failed, "2 pods do not fit", metav1.Condition{Type: autoscalingv1.Failed, Status: metav1.ConditionTrue, Reason: ReasonCapacityNotFound, Message: "capacity is not found: 2 pods do not fit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.LastTransitionTime = metav1.NewTime(now)
			if got := tc.outcome.Condition(tc.detail, now); got != tc.want {
				t.Errorf("Condition = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		retries int
		want    time.Duration
	}{{0, time.Minute}, {1, 2 * time.Minute}, {3, 8 * time.Minute}, {4, MaxBackoff}, {40, MaxBackoff}} {
		if got := Backoff(InitialBackoff, MaxBackoff, tc.retries); got != tc.want {
			t.Errorf("Backoff(%d) = %s, want %s", tc.retries, got, tc.want)
		}
	}
}

func TestSupported(t *testing.T) {
	for _, tc := range []struct {
		class               string
		supported, scalesUp bool
	}{{atomic, true, true}, {check, true, false}, {"queued-provisioning.gke.io", false, false}} {
		if Supported(tc.class) != tc.supported || ScalesUp(tc.class) != tc.scalesUp {
			t.Errorf("%s: Supported %v ScalesUp %v, want %v %v", tc.class, Supported(tc.class), ScalesUp(tc.class), tc.supported, tc.scalesUp)
		}
	}
}
