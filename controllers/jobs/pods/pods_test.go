package pods

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

func TestDefaulter(t *testing.T) {
	owned := func(apiVersion, kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", Controller: ptr.To(true)}}
	}
	tests := []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		gated  bool
	}{
		{name: "labelled plain pod", labels: map[string]string{berthv1.QueueNameLabel: "q"}, gated: true},
		{name: "labelled pod of a StatefulSet", labels: map[string]string{berthv1.QueueNameLabel: "q"}, owners: owned("apps/v1", "StatefulSet"), gated: true},
		{name: "labelled pod of a Job, held by the Job", labels: map[string]string{berthv1.QueueNameLabel: "q"}, owners: owned("batch/v1", "Job")},
		{name: "unlabelled pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels, OwnerReferences: tt.owners}}
			if err := (Defaulter{}).Default(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if IsGated(p) != tt.gated {
				t.Errorf("gated = %v, want %v", IsGated(p), tt.gated)
			}
			if err := (Defaulter{}).Default(context.Background(), p); err != nil || len(p.Spec.SchedulingGates) > 1 {
				t.Errorf("defaulting twice added the gate twice: %v", p.Spec.SchedulingGates)
			}
		})
	}
}

// TestReleaseFromStaleCache releases a pod from a cached copy a version
// behind the server's, as after kube-scheduler wrote the gated pod's
// PodScheduled condition: the release must not conflict, must keep what
// the newer version has, and must remove only berth's gate.
func TestReleaseFromStaleCache(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-0"},
		Spec: corev1.PodSpec{
			NodeSelector:    map[string]string{"pool": "a"},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "other.example/gate"}, {Name: berthv1.AdmissionGate}},
		},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod).WithStatusSubresource(pod).Build()
	stale := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), stale); err != nil {
		t.Fatal(err)
	}
	newer := stale.DeepCopy()
	newer.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}
	if err := c.Status().Update(ctx, newer); err != nil {
		t.Fatal(err)
	}

	g := &Gang{Pods: []corev1.Pod{*stale}, PodSetOf: func(*corev1.Pod) string { return "main" }}
	g.SetScheduling([]jobs.PodSetScheduling{{Name: "main", NodeSelector: map[string]string{"pool": "b", "rack": "r1"}}})
	g.Resume()
	if err := g.Write(ctx, c); err != nil {
		t.Fatalf("releasing from a stale copy: %v", err)
	}
	got := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if IsGated(got) {
		t.Errorf("berth's gate is still there: %v", got.Spec.SchedulingGates)
	}
	if want := []corev1.PodSchedulingGate{{Name: "other.example/gate"}}; !reflect.DeepEqual(got.Spec.SchedulingGates, want) {
		t.Errorf("gates = %v, want %v", got.Spec.SchedulingGates, want)
	}
	if want := map[string]string{"pool": "a", "rack": "r1"}; !reflect.DeepEqual(got.Spec.NodeSelector, want) {
		t.Errorf("node selector = %v, want %v (existing keys kept, missing ones added)", got.Spec.NodeSelector, want)
	}
	if len(got.Status.Conditions) != 1 {
		t.Errorf("the newer version's status was lost: %v", got.Status.Conditions)
	}
}
