package pods

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
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
