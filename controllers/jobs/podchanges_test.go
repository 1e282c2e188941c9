package jobs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestPodGangChanges(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "1", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "berth.dev/admission"}},
				Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
	}
	now := metav1.Now()
	tests := []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"resource version only", func(p *corev1.Pod) { p.ResourceVersion = "2" }, false},
		{"scheduling gated condition", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"})
		}, false},
		{"ready and container statuses", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true}}
			p.Status.PodIP = "10.0.0.1"
		}, false},
		{"phase: running", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, true},
		{"phase: failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, true},
		{"gate removed", func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }, true},
		{"bound to a node", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, true},
		{"requests resized", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("2")
		}, true},
		{"label", func(p *corev1.Pod) { p.Labels["berth.dev/workload"] = "uid" }, true},
		{"annotation", func(p *corev1.Pod) { p.Annotations = map[string]string{"example.com/touched": "1"} }, true},
		{"finalizer", func(p *corev1.Pod) { p.Finalizers = []string{"example.com/linger"} }, true},
		{"owner", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1"}} }, true},
		{"deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old, updated := base(), base()
			tc.change(updated)
			if got := PodGangChanges().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != tc.want {
				t.Errorf("passes = %v, want %v", got, tc.want)
			}
		})
	}
	if !PodGangChanges().Create(event.CreateEvent{Object: base()}) || !PodGangChanges().Delete(event.DeleteEvent{Object: base()}) {
		t.Error("creates and deletes always pass")
	}
}
