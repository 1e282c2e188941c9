package lws

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
)

func TestSchedulingGroups(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := lwsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	set := func(name string, policy lwsv1.StartupPolicyType, annotations map[string]string) *lwsv1.LeaderWorkerSet {
		return &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: annotations},
			Spec: lwsv1.LeaderWorkerSetSpec{StartupPolicy: policy}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		set("serve", lwsv1.LeaderCreatedStartupPolicy, nil),
		set("ready", lwsv1.LeaderReadyStartupPolicy, nil),
		set("exclusive", lwsv1.LeaderCreatedStartupPolicy, map[string]string{lwsv1.ExclusiveKeyAnnotationKey: "rack"}),
	).Build()
	pod := func(set, index, size string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: set + "-" + index,
			Labels: map[string]string{lwsv1.SetNameLabelKey: set, lwsv1.GroupIndexLabelKey: index}}}
		if size != "" {
			p.Annotations = map[string]string{lwsv1.SizeAnnotationKey: size}
		}
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"a replica of a LeaderCreated set is one group", pod("serve", "2", "3"), "lws-serve-2"},
		{"a replica of one pod has nothing to gang", pod("serve", "2", "1"), ""},
		{"without its size a pod joins none", pod("serve", "2", ""), ""},
		{"LeaderReady creates workers only once the leader is ready", pod("ready", "0", "3"), ""},
		{"exclusive placement creates workers only once the leader is scheduled", pod("exclusive", "0", "3"), ""},
		{"a set that cannot be read", pod("gone", "0", "3"), ""},
		{"a pod of no LeaderWorkerSet", &corev1.Pod{}, ""},
	}
	groups := SchedulingGroups(c)
	for _, tt := range tests {
		if got := groups(context.Background(), tt.pod); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
