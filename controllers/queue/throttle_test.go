package queue

import (
	"fmt"
	"testing"
	"time"
)

func TestThrottlePeriod(t *testing.T) {
	cases := []struct {
		name   string
		limits StatusLimits
		queues int
		want   time.Duration
	}{
		{"no queues yet: the interval", StatusLimits{Interval: 5 * time.Second, Rate: 2}, 0, 5 * time.Second},
		{"few queues: the interval", StatusLimits{Interval: 5 * time.Second, Rate: 2}, 10, 5 * time.Second},
		{"many queues: spread to the rate", StatusLimits{Interval: 5 * time.Second, Rate: 2}, 1000, 500 * time.Second},
		{"a fractional rate", StatusLimits{Interval: time.Second, Rate: 0.5}, 3, 6 * time.Second},
		{"no rate: the interval however many", StatusLimits{Interval: 5 * time.Second}, 1000, 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			th := newThrottle(tc.limits)
			for i := range tc.queues {
				th.wrote(fmt.Sprintf("q%d", i))
			}
			if got := th.period(); got != tc.want {
				t.Errorf("period() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestThrottleWait(t *testing.T) {
	th := newThrottle(StatusLimits{Interval: time.Hour, Rate: 1})
	if w := th.wait("a"); w != 0 {
		t.Fatalf("a queue never written waits %s, want 0", w)
	}
	th.wrote("a")
	if w := th.wait("a"); w <= 59*time.Minute {
		t.Errorf("just written, it waits %s, want about the hour", w)
	}
	th.forget("a")
	if w := th.wait("a"); w != 0 {
		t.Errorf("a forgotten queue waits %s, want 0", w)
	}
}
