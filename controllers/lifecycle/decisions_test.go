package lifecycle

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/admission"
	"github.com/berth-dev/berth/admission/enginetest"
)

// preemptionOf is the engine's preemption of victim, running in a
// ClusterQueue of one CPU, by preemptor of higher priority.
func preemptionOf(t *testing.T, victim, preemptor admission.WorkloadKey) admission.Preemption {
	t.Helper()
	_, res := enginetest.PreemptingQueue(t,
		admission.Workload{Key: victim, ClusterQueue: "cq", PodSets: enginetest.OneCPU, Admission: enginetest.Running(), AdmissionTime: 1},
		admission.Workload{Key: preemptor, ClusterQueue: "cq", Priority: 5, CreationTime: 2, PodSets: enginetest.OneCPU})
	if len(res.Preemptions) != 1 || res.Preemptions[0].Victim != victim {
		t.Fatalf("preemptions %+v, want %s's", res.Preemptions, victim)
	}
	return res.Preemptions[0]
}

// TestPreemptionNamesNoPreemptorOfAnotherNamespace: the victim's Evicted
// condition, which its namespace reads, names a preemptor of its own
// namespace with its priority, and one of another namespace by neither.
func TestPreemptionNamesNoPreemptorOfAnotherNamespace(t *testing.T) {
	victim := admission.WorkloadKey{Namespace: "team-a", Name: "train"}
	for _, tc := range []struct {
		name      string
		preemptor admission.WorkloadKey
		want      string
	}{
		{"of its own namespace", admission.WorkloadKey{Namespace: "team-a", Name: "urgent"},
			`preempted to admit team-a/urgent: preempted to admit team-a/urgent (priority 5) in ClusterQueue "cq": lower priority in the same ClusterQueue`},
		{"of another namespace", admission.WorkloadKey{Namespace: "team-b", Name: "urgent"},
			"preempted to admit " + admission.Redacted + ": preempted to admit " + admission.Redacted +
				` in ClusterQueue "cq": lower priority in the same ClusterQueue`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := preemptionOf(t, victim, tc.preemptor)
			if !strings.Contains(p.Message, tc.preemptor.String()) {
				t.Fatalf("the engine's message %q does not name the preemptor: the case tests nothing", p.Message)
			}
			if got := PreemptionTransition(p).Message; got != tc.want {
				t.Fatalf("Evicted message %q, want %q", got, tc.want)
			}
		})
	}
}
