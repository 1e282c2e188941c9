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

// TestNodeGroupBackoff: a pool whose scale-up failed is left out for
// NodeGroupBackoff, as cluster-autoscaler backs off a node group; 0 never
// leaves it out.
func TestNodeGroupBackoff(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		backoff time.Duration
		at      time.Duration
		want    bool
	}{
		{"backed off right after the failure", 5 * time.Minute, 0, true},
		{"still within the backoff", 5 * time.Minute, 4 * time.Minute, true},
		{"an option again once it ended", 5 * time.Minute, 5 * time.Minute, false},
		{"never backed off without a backoff", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &RequestReconciler{Options: Options{NodeGroupBackoff: tc.backoff}}
			r.backOff("a", t0)
			pools := r.backedOff([]*Pool{{Name: "a"}, {Name: "b"}}, t0.Add(tc.at))
			if pools[0].BackedOff != tc.want || pools[1].BackedOff {
				t.Errorf("backed off: a %v, b %v; want a %v, b false", pools[0].BackedOff, pools[1].BackedOff, tc.want)
			}
		})
	}
}
