package serving

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// TestHoldForSwap: the replacement of a swapped replica waits while the
// swap's surge pod is gated, and nothing else waits.
func TestHoldForSwap(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = appsv1.AddToScheme(scheme)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1",
		Annotations: map[string]string{revisionAnnotation: "2"}}}
	oldRS, newRS := rs("old", "rs1", "d1", "1"), rs("new", "rs2", "d1", "2")
	inNS := func(p corev1.Pod) *corev1.Pod { p.Namespace = "ns"; return &p }
	marked := inNS(replicaPod("new-a", "rs2", 10, true, false))
	marked.Annotations = map[string]string{berthv1.SwapAnnotation: "old-a"}
	released := inNS(replicaPod("new-a", "rs2", 10, false, true))
	released.Annotations = map[string]string{berthv1.SwapAnnotation: "old-a"}
	replacement := inNS(replicaPod("old-c", "rs1", 11, true, false))
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		rs      appsv1.ReplicaSet
		objects []client.Object
		wait    bool
	}{
		{name: "an old revision's gated pod waits while the surge pod is gated and marked",
			pod: replacement, rs: oldRS, objects: []client.Object{marked}, wait: true},
		{name: "it is queued once the surge pod is released", pod: replacement, rs: oldRS, objects: []client.Object{released}},
		{name: "it is queued when no swap is under way", pod: replacement, rs: oldRS,
			objects: []client.Object{inNS(replicaPod("new-a", "rs2", 10, true, false))}},
		{name: "the new revision's own pods never wait", pod: inNS(replicaPod("new-b", "rs2", 12, true, false)), rs: newRS,
			objects: []client.Object{marked}},
		{name: "a released old replica is not held", pod: inNS(replicaPod("old-b", "rs1", 2, false, true)), rs: oldRS,
			objects: []client.Object{marked}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]client.Object{oldRS.DeepCopy(), newRS.DeepCopy()}, tc.objects...)
			for _, o := range objs[:2] {
				o.SetNamespace("ns")
			}
			c := withControllerIndex(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)).Build()
			err := holdForSwap(context.Background(), c, d, ptr.To(tc.rs), tc.pod)
			var wait *jobs.WaitError
			if got := errors.As(err, &wait); got != tc.wait {
				t.Fatalf("holdForSwap = %v, want waiting %v", err, tc.wait)
			}
			if !tc.wait && err != nil {
				t.Fatalf("holdForSwap = %v", err)
			}
		})
	}
}
