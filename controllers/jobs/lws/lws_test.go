package lws

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func set(replicas, size int32, leader bool) *lwsv1.LeaderWorkerSet {
	tmpl := func(gpus string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}}}
	}
	s := &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", Labels: map[string]string{berthv1.QueueNameLabel: "q"}},
		Spec: lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To(replicas), LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
			Size: ptr.To(size), WorkerTemplate: tmpl("4"),
		}},
	}
	if leader {
		s.Spec.LeaderWorkerTemplate.LeaderTemplate = ptr.To(tmpl("1"))
	}
	return s
}

func TestReplicaPodSets(t *testing.T) {
	tests := []struct {
		name        string
		set         *lwsv1.LeaderWorkerSet
		wantSets    int
		leaderGPUs  string
		workerCount int32
	}{
		{name: "leader from the worker template", set: set(1, 4, false), wantSets: 2, leaderGPUs: "4", workerCount: 3},
		{name: "own leader template", set: set(1, 2, true), wantSets: 2, leaderGPUs: "1", workerCount: 1},
		{name: "size one is a leader only", set: set(1, 1, false), wantSets: 1, leaderGPUs: "4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newReplica(tt.set, 0, nil).PodSets()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.wantSets {
				t.Fatalf("got %d pod sets, want %d", len(got), tt.wantSets)
			}
			if q := got[0].Requests["nvidia.com/gpu"]; got[0].Name != LeaderPodSet || got[0].Count != 1 || q.String() != tt.leaderGPUs {
				t.Errorf("leader pod set %+v, want 1 pod of %s GPUs", got[0], tt.leaderGPUs)
			}
			if tt.wantSets == 2 && (got[1].Name != WorkersPodSet || got[1].Count != tt.workerCount) {
				t.Errorf("workers pod set %+v, want %d pods", got[1], tt.workerCount)
			}
		})
	}
}

func TestGangsOnePerReplica(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := func(name, group, worker string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{
			lwsv1.SetNameLabelKey: "s", lwsv1.GroupIndexLabelKey: group, lwsv1.WorkerIndexLabelKey: worker}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod("s-0", "0", "0"), pod("s-0-1", "0", "1"), pod("s-1", "1", "0")).Build()
	gangs, err := Kind{}.Gangs(context.Background(), c, set(3, 2, false))
	if err != nil {
		t.Fatal(err)
	}
	wantPods := []int{2, 1, 0}
	if len(gangs) != len(wantPods) {
		t.Fatalf("got %d gangs, want one per replica (%d)", len(gangs), len(wantPods))
	}
	for i, g := range gangs {
		r := g.(*Replica)
		if len(r.Pods) != wantPods[i] || g.WorkloadSuffix() != string(rune('0'+i)) {
			t.Errorf("replica %d: %d pods, suffix %q", i, len(r.Pods), g.WorkloadSuffix())
		}
		if i > 0 && !r.IsSuspended() {
			t.Errorf("replica %d misses pods and must count as held", i)
		}
	}
}

func TestDefaulterLabelsBothTemplates(t *testing.T) {
	s := set(1, 2, true)
	if err := (Defaulter{}).Default(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if s.Spec.LeaderWorkerTemplate.WorkerTemplate.Labels[berthv1.QueueNameLabel] != "q" ||
		s.Spec.LeaderWorkerTemplate.LeaderTemplate.Labels[berthv1.QueueNameLabel] != "q" {
		t.Errorf("templates not labelled: %+v", s.Spec.LeaderWorkerTemplate)
	}
}
