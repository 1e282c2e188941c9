package visibility

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/berth-dev/berth/admission"
	"github.com/berth-dev/berth/admission/enginetest"
	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

// busyQueue is an engine whose ClusterQueue "cq" of one CPU holds a running
// workload, a preemptor that evicts it and waits, and, behind the
// preemptor, team-a/mine of the same priority: no preemption fits beside
// the waiting one.
func busyQueue(t *testing.T, preemptor admission.WorkloadKey) *admission.Engine {
	t.Helper()
	e, res := enginetest.PreemptingQueue(t,
		admission.Workload{Key: admission.WorkloadKey{Namespace: "team-c", Name: "low"}, ClusterQueue: "cq", PodSets: enginetest.OneCPU,
			Admission: enginetest.Running(), AdmissionTime: 1},
		admission.Workload{Key: preemptor, ClusterQueue: "cq", Priority: 5, CreationTime: 2, PodSets: enginetest.OneCPU},
		admission.Workload{Key: admission.WorkloadKey{Namespace: "team-a", Name: "mine"}, ClusterQueue: "cq", Priority: 5, CreationTime: 3,
			PodSets: enginetest.OneCPU})
	if len(res.Preemptions) != 1 || res.Preemptions[0].Preemptor != preemptor {
		t.Fatalf("preemptions %+v, want one by %s", res.Preemptions, preemptor)
	}
	return e
}

// TestLocalQueueLineNamesNoPreemptorOfAnotherNamespace: a workload whose
// preemption waits for another preemptor of its queue is explained, in its
// LocalQueue's line, without that preemptor's name when it is another
// namespace's, and with it when it is the line's own.
func TestLocalQueueLineNamesNoPreemptorOfAnotherNamespace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		preemptor admission.WorkloadKey
		redacted  bool
	}{
		{"of another namespace", admission.WorkloadKey{Namespace: "team-b", Name: "urgent"}, true},
		{"of the line's namespace", admission.WorkloadKey{Namespace: "team-a", Name: "urgent"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := busyQueue(t, tc.preemptor)
			page, ok := e.Pending(admission.PendingQuery{ClusterQueue: "cq", Workload: admission.WorkloadKey{Namespace: "team-a", Name: "mine"}})
			if !ok || len(page.Items) != 1 {
				t.Fatalf("page %+v", page)
			}
			if raw := page.Items[0].Explanation.Preemption.Message; !strings.Contains(raw, tc.preemptor.String()) {
				t.Fatalf("the explanation %q does not name the preemptor: the case tests nothing", raw)
			}
			p := &pending{reader: fake.NewClientBuilder().Build()}
			obj, err := p.summary(context.Background(), page, "team-a")
			if err != nil {
				t.Fatal(err)
			}
			got := obj.(*visv1.PendingWorkloadsSummary).Items[0].Preemption.Message
			if named := strings.Contains(got, tc.preemptor.String()); named == tc.redacted || strings.Contains(got, Redacted) != tc.redacted {
				t.Fatalf("preemption message %q: preemptor named %v, want %v", got, named, !tc.redacted)
			}
		})
	}
}
