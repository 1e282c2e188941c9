package lws

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
)

// TestReplicaChargedForItsPods: each pod set of a replica is charged for
// the largest of its template and its pods that have not ended. berth
// releases a replica's pods whatever revision made them, so a template
// edited to ask for fewer GPUs while a rolling update's partition keeps
// the pods of the older, larger revision does not lower the charge below
// what those pods run with.
func TestReplicaChargedForItsPods(t *testing.T) {
	// pod is a pod of replica 0 at worker index worker that requests gpus.
	pod := func(worker, gpus string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s-0-" + worker, Labels: map[string]string{
			lwsv1.SetNameLabelKey: "s", lwsv1.GroupIndexLabelKey: "0", lwsv1.WorkerIndexLabelKey: worker}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	tests := []struct {
		name                    string
		templateGPUs            string
		pods                    []corev1.Pod
		wantLeader, wantWorkers string
	}{
		{name: "no pods yet: the template", templateGPUs: "4", wantLeader: "4", wantWorkers: "4"},
		{name: "the template made smaller while the pods of the older revision stay", templateGPUs: "1",
			pods:       []corev1.Pod{pod("0", "8", corev1.PodPending), pod("1", "8", corev1.PodPending), pod("2", "8", corev1.PodRunning)},
			wantLeader: "8", wantWorkers: "8"},
		{name: "one worker of the older revision left", templateGPUs: "1",
			pods:       []corev1.Pod{pod("0", "1", corev1.PodRunning), pod("1", "1", corev1.PodRunning), pod("2", "8", corev1.PodRunning)},
			wantLeader: "1", wantWorkers: "8"},
		{name: "a template larger than the pods", templateGPUs: "8",
			pods:       []corev1.Pod{pod("0", "4", corev1.PodRunning), pod("1", "4", corev1.PodRunning), pod("2", "4", corev1.PodRunning)},
			wantLeader: "8", wantWorkers: "8"},
		{name: "a pod that ended holds nothing", templateGPUs: "1",
			pods:       []corev1.Pod{pod("0", "1", corev1.PodRunning), pod("1", "16", corev1.PodFailed), pod("2", "1", corev1.PodRunning)},
			wantLeader: "1", wantWorkers: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := set(1, 3, false)
			s.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse(tt.templateGPUs)
			got, err := newReplica(s, 0, tt.pods).PodSets()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 {
				t.Fatalf("got %d pod sets, want the leader and the workers", len(got))
			}
			for i, want := range []string{tt.wantLeader, tt.wantWorkers} {
				if q := got[i].Requests["nvidia.com/gpu"]; q.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("pod set %s: %s GPUs per pod, want %s", got[i].Name, q.String(), want)
				}
			}
		})
	}
}

// TestReplicaNotGrownByPodDefaults: the cpu and memory a LimitRange gives
// a replica's pods at creation, and a RuntimeClass's overhead, are not
// charged beyond the template: its workers appear after the leader is
// admitted, and read as growth they would evict the running replica.
func TestReplicaNotGrownByPodDefaults(t *testing.T) {
	s := set(1, 2, false)
	s.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	before, err := newReplica(s, 0, nil).PodSets()
	if err != nil {
		t.Fatal(err)
	}
	defaulted := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s-0-1", Labels: map[string]string{
		lwsv1.SetNameLabelKey: "s", lwsv1.GroupIndexLabelKey: "0", lwsv1.WorkerIndexLabelKey: "1"}},
		Spec: corev1.PodSpec{Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Containers: []corev1.Container{
				{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"),
					corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}},
				{Name: "sidecar", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	after, err := newReplica(s, 0, []corev1.Pod{defaulted}).PodSets()
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if !equality.Semantic.DeepEqual(before[i].Requests, after[i].Requests) {
			t.Errorf("pod set %s charged %v once its pod appeared, want the template's %v", before[i].Name, after[i].Requests, before[i].Requests)
		}
	}
}
