package autoscaler

import (
	"testing"
	"time"
)

// TestNextLoop: one request per ScanInterval, as cluster-autoscaler answers
// one ProvisioningRequest per loop; 0 answers every request at once.
func TestNextLoop(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		name     string
		interval time.Duration
		at       time.Duration
		want     time.Duration
	}{
		{"the first request has the loop", 10 * time.Second, 0, 0},
		{"a second one waits for the next loop", 10 * time.Second, 3 * time.Second, 7 * time.Second},
		{"and has it once the interval passed", 10 * time.Second, 10 * time.Second, 0},
		{"a third right after it waits a whole interval", 10 * time.Second, 10 * time.Second, 10 * time.Second},
		{"without a loop every request is answered at once", 0, 10 * time.Second, 0},
		{"again", 0, 10 * time.Second, 0},
	}
	r := &RequestReconciler{}
	for _, s := range steps {
		r.Options.ScanInterval = s.interval
		if got := r.nextLoop(t0.Add(s.at)); got != s.want {
			t.Errorf("%s: nextLoop = %v, want %v", s.name, got, s.want)
		}
	}
}
