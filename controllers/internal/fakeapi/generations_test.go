package fakeapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGenerations(t *testing.T) {
	c := Generations(New(t))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{NodeName: "a"}}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if pod.UID == "" || pod.Generation != 1 {
		t.Fatalf("created with UID %q generation %d, want a UID and generation 1", pod.UID, pod.Generation)
	}
	steps := []struct {
		name   string
		change func(*corev1.Pod)
		want   int64
	}{
		{name: "a label", change: func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }, want: 1},
		{name: "the status", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, want: 1},
		{name: "the spec", change: func(p *corev1.Pod) { p.Spec.NodeName = "b" }, want: 2},
		{name: "nothing", change: func(*corev1.Pod) {}, want: 2},
	}
	for _, s := range steps {
		s.change(pod)
		if err := c.Update(t.Context(), pod); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if pod.Generation != s.want {
			t.Errorf("after an update of %s: generation %d, want %d", s.name, pod.Generation, s.want)
		}
	}
}
