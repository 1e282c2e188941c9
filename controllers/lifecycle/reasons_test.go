package lifecycle

import (
	"testing"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestEveryPendingReasonHasAnAPIReason: a pending reason the engine gives
// reaches the Workload as one of the API's typed reasons, never raw, and
// reads back as the same engine reason.
func TestEveryPendingReasonHasAnAPIReason(t *testing.T) {
	for _, r := range admission.PendingReasons() {
		if _, ok := reasons[r]; !ok {
			t.Errorf("engine reason %s has no API reason", r)
		}
		if back := EngineReason(ReasonOf(r)); back != r {
			t.Errorf("engine reason %s reads back as %s", r, back)
		}
	}
	if got := ReasonOf(admission.ExceedsDomainCapacity); got != berthv1.ReasonExceedsDomainCapacity {
		t.Errorf("ReasonOf(ExceedsDomainCapacity) = %s", got)
	}
}

// TestEvictionReasons: every eviction the engine decides is written with
// the API's reason of the same name, and the engine's messages name the
// API's LocalQueue label.
func TestEvictionReasons(t *testing.T) {
	for _, tc := range []struct {
		engine admission.EvictionReason
		want   berthv1.WorkloadReason
	}{
		{admission.EvictDeactivated, berthv1.ReasonDeactivated},
		{admission.EvictClusterQueueStopped, berthv1.ReasonClusterQueueStopped},
		{admission.EvictLocalQueueStopped, berthv1.ReasonLocalQueueStopped},
		{admission.EvictResized, berthv1.ReasonResized},
		{admission.EvictInvalidSpec, berthv1.ReasonInvalidSpec},
	} {
		ev := EvictionTransition(admission.Eviction{Reason: tc.engine, Message: "m"})
		if ev.Reason != tc.want || ev.Message != "m" {
			t.Errorf("EvictionTransition(%s) = %+v", tc.engine, ev)
		}
	}
	if admission.QueueNameLabel != berthv1.QueueNameLabel {
		t.Errorf("the engine names the LocalQueue label %q, the API %q", admission.QueueNameLabel, berthv1.QueueNameLabel)
	}
	if admission.HeadroomTaintKey != berthv1.HeadroomLabel {
		t.Errorf("the engine names the headroom taint %q, the API %q", admission.HeadroomTaintKey, berthv1.HeadroomLabel)
	}
}
