package serving

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// TestRecordedReplicaOutsideItsAdmissionIsHeld: a replica admitted on its
// record whose pod would run outside the admission (its node selector
// names another flavor's value, or it tolerates another ClusterQueue's
// headroom taint) stays gated, is not counted as started, and a PodHeld
// warning says why, as no Workload carries the PodsHeld condition.
func TestRecordedReplicaOutsideItsAdmissionIsHeld(t *testing.T) {
	tests := []struct {
		name   string
		change func(*corev1.Pod)
		phrase string
	}{
		{name: "another flavor's value", change: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"gpu": "a100"} },
			phrase: "sets gpu=a100 and its gang was admitted on nodes with gpu=h200"},
		{name: "another queue's headroom", change: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual, Value: "other",
				Effect: corev1.TaintEffectNoSchedule}}
		}, phrase: "berth.dev/headroom=other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := gpuPod("web-1-a", ref("ReplicaSet", "web-1", "rs1"), 1)
			tt.change(p)
			objs := []client.Object{
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1", Labels: queued}},
				&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "rs1",
					OwnerReferences: []metav1.OwnerReference{ref("Deployment", "web", "d1")}}},
				&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"},
					Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h200"}}},
				p,
			}
			c := indexedClient(t, DeploymentKind{}, objs...)
			recs := &fakeRecords{state: lifecycle.RecordAdmitted, admission: &berthv1.Admission{ClusterQueue: "cq",
				PodSetAssignments: []berthv1.PodSetAssignment{{Name: PodSetName, Count: 1,
					Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}}}}}
			rec := &fakeapi.Recorder{}
			opts := jobs.Options{Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)), Changes: &seenChanges{}, Records: recs, OfferReplicas: true}
			r := jobs.NewReconciler(c, c, rec, DeploymentKind{}, opts)
			if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "web-1-a"}}); err != nil {
				t.Fatal(err)
			}
			got := &corev1.Pod{}
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "web-1-a"}, got); err != nil {
				t.Fatal(err)
			}
			if !pods.IsGated(got) || len(recs.started) != 0 {
				t.Errorf("gated %v, started %d times; want the pod held and not counted as started", pods.IsGated(got), len(recs.started))
			}
			events := rec.Events()
			if len(events) != 1 || events[0].Reason != jobs.EventPodHeld || !strings.Contains(events[0].Note, tt.phrase) {
				t.Errorf("events %+v, want one %s that says %q", events, jobs.EventPodHeld, tt.phrase)
			}
		})
	}
}
