package jobs

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// podJob is a job of one pod set read from one pod, of a kind berth holds
// by suspending it.
type podJob struct {
	GenericJob
	pod *corev1.Pod
}

func (j podJob) Object() client.Object { return j.pod }
func (j podJob) PodSets() ([]berthv1.PodSet, error) {
	return []berthv1.PodSet{{Name: "main", Count: 1}}, nil
}
func (j podJob) PodTemplates() []PodSetTemplate {
	return []PodSetTemplate{{Name: "main", Spec: &j.pod.Spec}}
}
func (j podJob) Scheduling() []PodSetScheduling {
	return []PodSetScheduling{{Name: "main", NodeSelector: j.pod.Spec.NodeSelector, Tolerations: j.pod.Spec.Tolerations}}
}

// releasedJob is a podJob whose pods berth releases (a Writer).
type releasedJob struct{ podJob }

func (releasedJob) Write(context.Context, client.Writer) error { return nil }

// TestOriginalSchedulingOnlyForSuspendedKinds reads a job's own scheduling
// from berth's original-scheduling record only for the kinds berth writes
// it for: a record on a kind whose pods berth releases (a pod, a
// Deployment's template) was written by someone else, and the Workload's
// template and the release carry the pods' real node selector and
// tolerations, with the admission's flavor labels winning.
func TestOriginalSchedulingOnlyForSuspendedKinds(t *testing.T) {
	foreign := corev1.Toleration{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual, Value: "other", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	pod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p", Annotations: map[string]string{
				berthv1.OriginalSchedulingAnnotation: `[{"name":"main"}]`}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"gpu": "a100"}, Tolerations: []corev1.Toleration{foreign},
				Containers: []corev1.Container{{Name: "c"}}},
		}
	}
	tests := []struct {
		name         string
		job          GenericJob
		wantTemplate corev1.PodSpec   // node selector and tolerations of the Workload's template
		wantRelease  PodSetScheduling // what the start gives the pods
	}{
		{name: "pods berth releases: the record is ignored", job: releasedJob{podJob{pod: pod()}},
			wantTemplate: corev1.PodSpec{NodeSelector: map[string]string{"gpu": "a100"}, Tolerations: []corev1.Toleration{foreign}},
			wantRelease: PodSetScheduling{NodeSelector: map[string]string{"gpu": "h200"}, Tolerations: []corev1.Toleration{foreign, gpu},
				Placement: map[string]string{"gpu": "h200"}, ClusterQueue: "cq"}},
		{name: "a suspended kind: berth's record of its template before the start", job: podJob{pod: pod()},
			wantTemplate: corev1.PodSpec{},
			wantRelease: PodSetScheduling{NodeSelector: map[string]string{"gpu": "h200"}, Tolerations: []corev1.Toleration{gpu},
				Placement: map[string]string{"gpu": "h200"}, ClusterQueue: "cq"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			h200 := &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h200"},
				Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "h200"}, Tolerations: []corev1.Toleration{gpu}}}
			c := fake.NewClientBuilder().WithScheme(handOffScheme(t)).WithObjects(h200).Build()
			r := &Reconciler{client: c, reader: c}
			spec, err := r.spec(ctx, tt.job)
			if err != nil {
				t.Fatal(err)
			}
			got := spec.podSets[0].Template.Spec
			if !maps.Equal(got.NodeSelector, tt.wantTemplate.NodeSelector) || !equality.Semantic.DeepEqual(got.Tolerations, tt.wantTemplate.Tolerations) {
				t.Errorf("template node selector %v, tolerations %v; want %v, %v",
					got.NodeSelector, got.Tolerations, tt.wantTemplate.NodeSelector, tt.wantTemplate.Tolerations)
			}
			wl := &berthv1.Workload{Status: berthv1.WorkloadStatus{Admission: &berthv1.Admission{ClusterQueue: "cq",
				PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}}}}}}
			s, missing, err := r.admittedScheduling(ctx, tt.job, wl)
			if err != nil || missing != "" {
				t.Fatalf("admittedScheduling: %v (missing %q)", err, missing)
			}
			want := tt.wantRelease
			if g := s[0]; !maps.Equal(g.NodeSelector, want.NodeSelector) || !equality.Semantic.DeepEqual(g.Tolerations, want.Tolerations) ||
				!maps.Equal(g.Placement, want.Placement) || g.ClusterQueue != want.ClusterQueue {
				t.Errorf("release node selector %v, tolerations %v, placement %v, queue %q; want %v, %v, %v, %q",
					g.NodeSelector, g.Tolerations, g.Placement, g.ClusterQueue, want.NodeSelector, want.Tolerations, want.Placement, want.ClusterQueue)
			}
		})
	}
}
