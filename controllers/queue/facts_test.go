package queue

import (
	"testing"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestQueueFactsChange: every change of a LocalQueue the engine decides its
// workloads on changes its facts, so that replicas waiting without a
// Workload are fed to the engine again; its status does not.
func TestQueueFactsChange(t *testing.T) {
	base := &berthv1.LocalQueue{Spec: berthv1.LocalQueueSpec{ClusterQueue: "cq", PriorityClasses: []string{"high"}}}
	for _, tc := range []struct {
		name   string
		change func(*berthv1.LocalQueue)
		same   bool
	}{
		{name: "a class taken away", change: func(lq *berthv1.LocalQueue) { lq.Spec.PriorityClasses = nil }},
		{name: "a class granted", change: func(lq *berthv1.LocalQueue) { lq.Spec.PriorityClasses = append(lq.Spec.PriorityClasses, "urgent") }},
		{name: "stopped", change: func(lq *berthv1.LocalQueue) { lq.Spec.StopPolicy = berthv1.StopPolicyHold }},
		{name: "its status", change: func(lq *berthv1.LocalQueue) { lq.Status.PendingWorkloads = 3 }, same: true},
	} {
		changed := base.DeepCopy()
		tc.change(changed)
		if got := queueFacts(changed) == queueFacts(base); got != tc.same {
			t.Errorf("%s: facts unchanged %v, want %v", tc.name, got, tc.same)
		}
	}
}
