package pods

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/berth-dev/berth/controllers/jobs"
)

// controlledBy returns a controller reference to obj of kind.
func controlledBy(kind string, obj metav1.Object) []metav1.OwnerReference {
	return []metav1.OwnerReference{{Kind: kind, Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true)}}
}

// TestReplicaWorkloadFollowsTheSetsOwnObjects: a pod is counted as a
// LeaderWorkerSet replica's only when its controllers lead to the set by
// UID — its leader StatefulSet, or a workers' StatefulSet of one of the
// leader's pods — not when it merely carries the set's labels under a
// StatefulSet of a tenant's, or a controller reference that names the
// set's objects with another UID.
func TestReplicaWorkloadFollowsTheSetsOwnObjects(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	scheme.AddKnownTypes(schema.GroupVersion{Group: "leaderworkerset.x-k8s.io", Version: "v1"}, &lwsv1.LeaderWorkerSet{}, &lwsv1.LeaderWorkerSetList{})
	const ns = "ns"
	set := &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serve", UID: "set"}}
	leaders := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serve", UID: "leaders",
		OwnerReferences: controlledBy("LeaderWorkerSet", set)}}
	leader := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serve-0", UID: "leader",
		OwnerReferences: controlledBy("StatefulSet", leaders)}}
	workers := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serve-0", UID: "workers",
		OwnerReferences: controlledBy("Pod", leader)}}
	mine := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "look-alike", UID: "mine"}}
	// A StatefulSet of the tenant's that names the leader pod as its
	// controller, under a name of its own.
	posing := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "posing", UID: "posing",
		OwnerReferences: controlledBy("Pod", leader)}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(set, leaders, leader, workers, mine, posing).Build()
	v := Validator{Workloads: jobs.Workloads{Cache: c, API: c}}
	pod := func(refs []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", OwnerReferences: refs,
			Labels: map[string]string{lwsv1.SetNameLabelKey: "serve", lwsv1.GroupIndexLabelKey: "0"}}}
	}
	forged := controlledBy("StatefulSet", leaders)
	forged[0].UID = types.UID("other")
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		own  bool
	}{
		{name: "the leader, of the set's leader StatefulSet", refs: controlledBy("StatefulSet", leaders), own: true},
		{name: "a worker, of the leader pod's workers' StatefulSet", refs: controlledBy("StatefulSet", workers), own: true},
		{name: "a pod the set controls itself", refs: controlledBy("LeaderWorkerSet", set), own: true},
		{name: "a pod of the tenant's StatefulSet", refs: controlledBy("StatefulSet", mine)},
		{name: "a pod of a StatefulSet that names the leader pod but not after it", refs: controlledBy("StatefulSet", posing)},
		{name: "a reference to the leader StatefulSet with another UID", refs: forged},
		{name: "a reference to a StatefulSet that does not exist",
			refs: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "gone", UID: "gone", Controller: ptr.To(true)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, why, err := v.replicaWorkload(context.Background(), pod(tc.refs))
			if err != nil {
				t.Fatal(err)
			}
			if own := name != ""; own != tc.own {
				t.Fatalf("counted as the replica's: %v (%q), want %v", own, why, tc.own)
			}
			if !tc.own && why == "" {
				t.Fatal("refused without saying why")
			}
		})
	}
}
