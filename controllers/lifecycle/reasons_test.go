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
