package serving

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
)

// TestIncompleteSetIsReportedAfterItsGrace: a whole set that lacks pods is
// not queued; while it is younger than its grace berth only looks again
// later, and once the grace is over it warns (SetIncomplete), once per
// look.
func TestIncompleteSetIsReportedAfterItsGrace(t *testing.T) {
	created := time.Unix(1000, 0)
	cases := []struct {
		name      string
		age       time.Duration
		wantAfter time.Duration
		wantEvent bool
	}{
		{"just created", time.Second, 9 * time.Second, false},
		{"at the end of its grace", 10 * time.Second, 0, true},
		{"long after", time.Hour, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := sts("train", "s2", 3)
			set.CreationTimestamp = metav1.NewTime(created)
			k := StatefulSetKind{}
			b, err := fakeapi.Builder(set, gpuPod("train-0", ref("StatefulSet", "train", "s2"), 1, berthv1.GangAnnotation, berthv1.GangSet))
			if err != nil {
				t.Fatal(err)
			}
			c := b.WithIndex(&corev1.Pod{}, jobs.KeyIndexKey(k.GVK()), func(o client.Object) []string {
				if key, ok := k.Key(o); ok {
					return []string{key}
				}
				return nil
			}).Build()
			rec := &fakeapi.Recorder{}
			opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(created.Add(tc.age)), Changes: &seenChanges{}}
			r := jobs.NewReconciler(c, c, rec, k, opts)
			res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "train-set"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter != tc.wantAfter {
				t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, tc.wantAfter)
			}
			reasons := rec.Reasons()
			if got := len(reasons) == 1 && reasons[0] == EventSetIncomplete; got != tc.wantEvent || (!tc.wantEvent && len(reasons) != 0) {
				t.Errorf("events %v, want SetIncomplete: %v", reasons, tc.wantEvent)
			}
			wls := &berthv1.WorkloadList{}
			if err := c.List(t.Context(), wls); err != nil || len(wls.Items) != 0 {
				t.Errorf("Workloads %d (%v): an incomplete set is not queued", len(wls.Items), err)
			}
		})
	}
}
