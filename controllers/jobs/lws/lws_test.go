package lws

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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

// TestGangsOnePerReplica splits the set's pods by replica and counts only
// the pods whose StatefulSets are the set's own, by UID and name: pods of a
// tenant's StatefulSet that carry the set's labels are excluded.
func TestGangsOnePerReplica(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	lws := set(3, 2, false)
	lws.UID = "lws-uid"
	ctrl := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	sts := func(name string, uid types.UID, owner []metav1.OwnerReference) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, OwnerReferences: owner}}
	}
	pod := func(name, group, worker string, uid types.UID, owner []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, OwnerReferences: owner, Labels: map[string]string{
			lwsv1.SetNameLabelKey: "s", lwsv1.GroupIndexLabelKey: group, lwsv1.WorkerIndexLabelKey: worker}}}
	}
	leaders := ctrl("StatefulSet", "s", "sts-leader")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		sts("s", "sts-leader", ctrl("LeaderWorkerSet", "s", lws.UID)),
		sts("s-0", "sts-w0", ctrl("Pod", "s-0", "pod-s-0")),
		pod("s-0", "0", "0", "pod-s-0", leaders), pod("s-0-1", "0", "1", "pod-s-0-1", ctrl("StatefulSet", "s-0", "sts-w0")),
		pod("s-1", "1", "0", "pod-s-1", leaders),
		// A tenant's StatefulSet that names the set as its controller, and
		// one that names a leader pod: neither holds the set's names.
		sts("evil", "sts-evil", ctrl("LeaderWorkerSet", "s", lws.UID)),
		pod("evil-0", "0", "0", "pod-evil-0", ctrl("StatefulSet", "evil", "sts-evil")),
		sts("fake", "sts-fake", ctrl("Pod", "s-1", "pod-s-1")),
		pod("fake-0", "1", "1", "pod-fake-0", ctrl("StatefulSet", "fake", "sts-fake")),
		// A pod that names no StatefulSet at all.
		pod("bare", "2", "0", "pod-bare", nil),
		// A worker of a replica scaled away, going after its StatefulSet:
		// neither counted nor held.
		terminating(pod("s-3-1", "3", "1", "pod-s-3-1", ctrl("StatefulSet", "s-3", "sts-w3"))),
	).Build()
	gangs, err := Kind{}.Gangs(context.Background(), c, lws)
	if err != nil {
		t.Fatal(err)
	}
	wantPods := [][]string{{"s-0", "s-0-1"}, {"s-1"}, nil}
	if len(gangs) != len(wantPods) {
		t.Fatalf("got %d gangs, want one per replica (%d)", len(gangs), len(wantPods))
	}
	for i, g := range gangs {
		r := g.(*Replica)
		var names []string
		for _, p := range r.Pods {
			names = append(names, p.Name)
		}
		if !slices.Equal(names, wantPods[i]) || g.WorkloadSuffix() != string(rune('0'+i)) {
			t.Errorf("replica %d: pods %v, suffix %q; want %v", i, names, g.WorkloadSuffix(), wantPods[i])
		}
		if i > 0 && !r.IsSuspended() {
			t.Errorf("replica %d misses pods and must count as held", i)
		}
	}
	var excluded []string
	for _, e := range gangs[0].(*Replica).Held() {
		excluded = append(excluded, e.Name)
	}
	slices.Sort(excluded)
	if want := []string{"bare", "evil-0", "fake-0"}; !slices.Equal(excluded, want) {
		t.Errorf("excluded %v, want %v", excluded, want)
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

// terminating marks a pod as being deleted; the finalizer keeps it in the
// fake client as it keeps it in a cluster.
func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = ptr.To(metav1.Now())
	p.Finalizers = []string{"test/hold"}
	return p
}
