package pods

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// TestReleaseKeepsToTheAdmission releases a gang's pods only where it was
// admitted: the admission's flavor labels and domain end up in every
// released pod's node selector, and a pod that pins one of them to another
// value (its gated node selector cannot be changed), or that tolerates
// another ClusterQueue's headroom taint, is held with why, taking no place
// from the pods behind it.
func TestReleaseKeepsToTheAdmission(t *testing.T) {
	type pod struct {
		name     string
		selector map[string]string
		tols     []corev1.Toleration
	}
	headroom := func(op corev1.TolerationOperator, value string) []corev1.Toleration {
		return []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: op, Value: value, Effect: corev1.TaintEffectNoSchedule}}
	}
	admitted := map[string]string{"gpu": "h200", "rack": "r1"}
	tests := []struct {
		name         string
		pods         []pod
		count        int32
		wantReleased map[string]map[string]string // pod: its node selector once released
		wantHeld     map[string]string            // pod: a phrase of why
	}{
		{name: "a pod with none of the admission's keys gets them all",
			pods: []pod{{name: "a"}}, count: 1,
			wantReleased: map[string]map[string]string{"a": {"gpu": "h200", "rack": "r1", "team": "ml"}}},
		{name: "a pod that already names the admission's values is released",
			pods: []pod{{name: "a", selector: map[string]string{"gpu": "h200", "rack": "r1"}}}, count: 1,
			wantReleased: map[string]map[string]string{"a": {"gpu": "h200", "rack": "r1", "team": "ml"}}},
		{name: "a pod that names another flavor's value is held",
			pods: []pod{{name: "a", selector: map[string]string{"gpu": "a100"}}}, count: 1,
			wantHeld: map[string]string{"a": "sets gpu=a100 and its gang was admitted on nodes with gpu=h200"}},
		{name: "a pod that names another domain is held",
			pods: []pod{{name: "a", selector: map[string]string{"rack": "r2"}}}, count: 1,
			wantHeld: map[string]string{"a": "sets rack=r2 and its gang was admitted on nodes with rack=r1"}},
		{name: "a key the admission does not set keeps the pod's value",
			pods: []pod{{name: "a", selector: map[string]string{"team": "infra"}}}, count: 1,
			wantReleased: map[string]map[string]string{"a": {"gpu": "h200", "rack": "r1", "team": "infra"}}},
		{name: "a held pod takes no place from the pod behind it",
			pods: []pod{{name: "a", selector: map[string]string{"gpu": "a100"}}, {name: "b"}}, count: 1,
			wantReleased: map[string]map[string]string{"b": {"gpu": "h200", "rack": "r1", "team": "ml"}},
			wantHeld:     map[string]string{"a": "gpu=a100"}},
		{name: "a pod that tolerates another queue's headroom is held",
			pods: []pod{{name: "a", tols: headroom(corev1.TolerationOpEqual, "other")}}, count: 1,
			wantHeld: map[string]string{"a": "berth.dev/headroom=other"}},
		{name: "a pod that tolerates every queue's headroom is held",
			pods: []pod{{name: "a", tols: headroom(corev1.TolerationOpExists, "")}}, count: 1,
			wantHeld: map[string]string{"a": "whatever its value"}},
		{name: "a pod that tolerates its own queue's headroom is released",
			pods: []pod{{name: "a", tols: headroom(corev1.TolerationOpEqual, "cq")}}, count: 1,
			wantReleased: map[string]map[string]string{"a": {"gpu": "h200", "rack": "r1", "team": "ml"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			var all []corev1.Pod
			var objs []client.Object
			for i, p := range tt.pods {
				all = append(all, corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: p.name, CreationTimestamp: metav1.Unix(int64(i), 0)},
					Spec: corev1.PodSpec{NodeSelector: maps.Clone(p.selector), Tolerations: p.tols,
						SchedulingGates: []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}},
				})
				objs = append(objs, all[i].DeepCopy())
			}
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
			g := &Gang{Pods: all, PodSetOf: func(*corev1.Pod) string { return "main" }}
			// As admittedScheduling makes it: the gang's own selector (the
			// first pod's, for a pod group) with the admission's winning.
			g.SetScheduling([]jobs.PodSetScheduling{{Name: "main", Count: tt.count, ClusterQueue: "cq",
				NodeSelector: map[string]string{"gpu": "h200", "rack": "r1", "team": "ml"}, Placement: admitted}})
			g.Resume()
			if err := g.Write(ctx, c); err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.pods {
				got := &corev1.Pod{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: p.name}, got); err != nil {
					t.Fatal(err)
				}
				want, released := tt.wantReleased[p.name]
				switch {
				case released && IsGated(got):
					t.Errorf("pod %s stays gated, want it released", p.name)
				case released && !maps.Equal(got.Spec.NodeSelector, want):
					t.Errorf("pod %s released with node selector %v, want %v", p.name, got.Spec.NodeSelector, want)
				case !released && !IsGated(got):
					t.Errorf("pod %s released with node selector %v, want it held", p.name, got.Spec.NodeSelector)
				case !released && !maps.Equal(got.Spec.NodeSelector, p.selector):
					t.Errorf("held pod %s changed: node selector %v", p.name, got.Spec.NodeSelector)
				}
			}
			held := map[string]string{}
			for _, h := range g.Held() {
				held[h.Name] = h.Why
			}
			if !slices.Equal(slices.Sorted(maps.Keys(held)), slices.Sorted(maps.Keys(tt.wantHeld))) {
				t.Fatalf("held %v, want %v", held, tt.wantHeld)
			}
			for name, phrase := range tt.wantHeld {
				if !strings.Contains(held[name], phrase) {
					t.Errorf("pod %s held because %q, want it to say %q", name, held[name], phrase)
				}
			}
			if g.Released() != len(tt.wantReleased) {
				t.Errorf("Released() = %d, want %d", g.Released(), len(tt.wantReleased))
			}
		})
	}
}
