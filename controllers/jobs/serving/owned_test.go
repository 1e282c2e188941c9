package serving

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
)

// withControllerIndex indexes the fake client's ReplicaSets and pods by
// controller, as the manager's cache does once Rollouts registered.
func withControllerIndex(b *fake.ClientBuilder) *fake.ClientBuilder {
	return b.WithIndex(&appsv1.ReplicaSet{}, ControllerIndex, ControllerUIDOf).WithIndex(&corev1.Pod{}, ControllerIndex, ControllerUIDOf)
}

// TestOwnedLists: a Deployment's ReplicaSets and their queued pods are read
// through the controller index, and only they: not another Deployment's,
// not an unqueued pod of the same ReplicaSet, not a pod without a
// controller.
func TestOwnedLists(t *testing.T) {
	ctrlRef := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: new(bool(true))}}
	}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d-web"}}
	rs := func(name string, uid, owner types.UID) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid,
			OwnerReferences: ctrlRef("Deployment", "web", owner)}}
	}
	pod := func(name string, owner types.UID, queued bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{}}}
		if owner != "" {
			p.OwnerReferences = ctrlRef("ReplicaSet", "x", owner)
		}
		if queued {
			p.Labels[berthv1.QueueNameLabel] = "team"
		}
		return p
	}
	b, err := fakeapi.Builder(web, rs("web-1", "rs-1", "d-web"), rs("web-2", "rs-2", "d-web"), rs("api-1", "rs-3", "d-api"),
		pod("web-1-a", "rs-1", true), pod("web-2-a", "rs-2", true), pod("web-1-b", "rs-1", false),
		pod("api-1-a", "rs-3", true), pod("lone", "", true))
	if err != nil {
		t.Fatal(err)
	}
	c := withControllerIndex(b).Build()
	ctx := context.Background()
	rss, err := replicaSetsOf(ctx, c, web)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(rss); !slices.Equal(got, []string{"web-1", "web-2"}) {
		t.Errorf("ReplicaSets of web: %v, want web-1 and web-2", got)
	}
	pods, err := queuedPodsOf(ctx, c, "ns", uids(rss)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(pods); !slices.Equal(got, []string{"web-1-a", "web-2-a"}) {
		t.Errorf("queued pods of web: %v, want web-1-a and web-2-a", got)
	}
	if v := ControllerUIDOf(pod("lone", "", true)); v != nil {
		t.Errorf("a pod without a controller is indexed under %v", v)
	}
}

// names are the sorted names of objs.
func names[T any, PT interface {
	*T
	metav1.Object
}](objs []T) []string {
	out := make([]string, 0, len(objs))
	for i := range objs {
		out = append(out, PT(&objs[i]).GetName())
	}
	slices.Sort(out)
	return out
}
