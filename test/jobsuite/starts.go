package jobsuite

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// StartTimes summarises the time from since to the moment each replica's
// pods were all Ready (the latest pod of a replica counts), over the
// replicas that started: p50, p95 and max, and how many of all the
// replicas started within slo. Pod conditions have one-second precision,
// so since is truncated to the second. It measures and asserts nothing:
// suites record it as a report entry, and docs quote it.
func StartTimes(since time.Time, slo time.Duration, replicas map[string][]corev1.Pod) string {
	var waits []time.Duration
	for _, pods := range replicas {
		var last time.Time
		for _, p := range pods {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(last) {
					last = c.LastTransitionTime.Time
				}
			}
		}
		if !last.IsZero() {
			waits = append(waits, max(0, last.Sub(since.Truncate(time.Second))))
		}
	}
	if len(waits) == 0 {
		return fmt.Sprintf("none of %d replicas started", len(replicas))
	}
	slices.Sort(waits)
	met := 0
	for _, w := range waits {
		if w <= slo {
			met++
		}
	}
	at := func(q float64) time.Duration { return waits[min(len(waits)-1, int(q*float64(len(waits))))] }
	return fmt.Sprintf("%d of %d replicas started: scale-up to Ready p50 %s, p95 %s, max %s; within %s: %d of %d",
		len(waits), len(replicas), at(0.5), at(0.95), waits[len(waits)-1], slo, met, len(replicas))
}
