package pods

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// TestReleasedPodsAreNotReleasedTwice: the release of each pod of a gang
// reaches the cache on its own, so the next pass may see some pods still
// gated. Given what the releases returned, it releases none of them again,
// and counts them as running; a pod whose cached copy is not older than
// the release is judged as the cache shows it.
func TestReleasedPodsAreNotReleasedTwice(t *testing.T) {
	ctx := context.Background()
	gated := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name)},
			Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}}}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var patches atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(gated("a"), gated("b"), gated("c")).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	read := func() []corev1.Pod {
		list := &corev1.PodList{}
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	gang := func(ps []corev1.Pod) *Gang {
		g := &Gang{Pods: ps, PodSetOf: func(*corev1.Pod) string { return "main" }}
		g.SetScheduling([]jobs.PodSetScheduling{{Name: "main", Count: 3}})
		return g
	}
	stale := read()

	// Write releases the pods it holds in place: give it copies.
	first := gang(read())
	first.Assume(nil)
	first.Resume()
	if err := first.Write(ctx, c); err != nil {
		t.Fatal(err)
	}
	written := first.Written()
	if patches.Load() != 3 || len(written) != 3 {
		t.Fatalf("first pass: %d patches, %d writes kept; want 3 and 3", patches.Load(), len(written))
	}

	// The cache has seen a's release only.
	fresh := read()
	mixed := []corev1.Pod{fresh[0], stale[1], stale[2]}
	second := gang(mixed)
	second.Assume(written)
	if second.IsSuspended() || !second.IsActive() {
		t.Errorf("suspended %v, active %v: released pods are not waiting", second.IsSuspended(), second.IsActive())
	}
	second.Resume()
	if err := second.Write(ctx, c); err != nil {
		t.Fatal(err)
	}
	if patches.Load() != 3 || second.Released() != 0 {
		t.Errorf("second pass: %d patches in all, %d released; want no new release", patches.Load(), second.Released())
	}
	if w := second.Written(); len(w) != 2 || w["u-a"] != "" {
		t.Errorf("kept %v, want b and c only: the cache shows a's release", w)
	}

	// A copy that is not older than what a release returned is what it
	// says: a gated pod is released.
	b := fresh[1].DeepCopy()
	b.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
	third := gang([]corev1.Pod{*b})
	third.Assume(map[types.UID]string{b.UID: stale[1].ResourceVersion})
	if !third.IsSuspended() {
		t.Error("a gated copy as new as the release must count as gated")
	}
	if len(third.Written()) != 0 {
		t.Errorf("kept %v, want nothing", third.Written())
	}
}
