package scheduler

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
)

// TestWrittenMessagesNameNoOtherNamespace: team-a's admitted workload w is
// preempted by p, of another namespace or of team-a, in a ClusterQueue of
// one CPU. w's Evicted condition names p, and p's pending condition names
// w, only when they share a namespace: each Workload is read by whoever
// may read its namespace.
func TestWrittenMessagesNameNoOtherNamespace(t *testing.T) {
	for _, other := range []string{"team-b", ns} {
		t.Run("p of "+other, func(t *testing.T) {
			cq := testCQ(func(cq *berthv1.ClusterQueue) {
				cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("1")
				cq.Spec.Preemption.WithinClusterQueue = berthv1.PreemptionMode(admission.PreemptLowerPriority)
			})
			lqB := testLQ("")
			lqB.Namespace = other
			p := testWL(func(wl *berthv1.Workload) { wl.Namespace, wl.Name, wl.Spec.Priority = other, "p", 5 })
			objs := []client.Object{cq, testLQ(""), testWL(admittedWL), p}
			if other != ns {
				objs = append(objs, lqB)
			}
			b, err := fakeapi.Builder(objs...)
			if err != nil {
				t.Fatal(err)
			}
			c := b.WithStatusSubresource(&berthv1.Workload{}).Build()
			clock := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
			s, err := New(c, c, &fakeapi.Recorder{}, Options{Metrics: metrics.New(), Clock: clock, PendingStatusDelay: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if err := s.UpsertClusterQueue(cq, lifecycle.QueueFlavors{}, false); err != nil {
				t.Fatal(err)
			}
			wKey, pKey := client.ObjectKey{Namespace: ns, Name: "w"}, client.ObjectKey{Namespace: other, Name: "p"}
			for _, k := range []client.ObjectKey{wKey, pKey} {
				wl := &berthv1.Workload{}
				if err := c.Get(ctx, k, wl); err != nil {
					t.Fatal(err)
				}
				if err := s.Sync(ctx, wl); err != nil {
					t.Fatal(err)
				}
			}
			s.cycle(ctx)
			clock.SetTime(clock.Now().Add(time.Second)) // p's waiting reason is due
			s.flushPending(ctx)
			for _, tc := range []struct {
				key    client.ObjectKey
				cond   string
				reason berthv1.WorkloadReason
				names  string
			}{
				{wKey, berthv1.ConditionEvicted, berthv1.ReasonPreempted, other + "/p"},
				{pKey, berthv1.ConditionQuotaReserved, berthv1.ReasonWaitingForPreemption, ns + "/w"},
			} {
				wl := &berthv1.Workload{}
				if err := c.Get(ctx, tc.key, wl); err != nil {
					t.Fatal(err)
				}
				cond := meta.FindStatusCondition(wl.Status.Conditions, tc.cond)
				if cond == nil || cond.Reason != string(tc.reason) {
					t.Fatalf("%s: %s = %+v, want reason %s", tc.key, tc.cond, cond, tc.reason)
				}
				same := other == ns
				if named := strings.Contains(cond.Message, tc.names); named != same || strings.Contains(cond.Message, admission.Redacted) == same ||
					(!same && strings.Contains(cond.Message, "(priority")) {
					t.Fatalf("%s: %s message %q: names %s %v, want %v", tc.key, tc.cond, cond.Message, tc.names, named, same)
				}
			}
		})
	}
}
