package serving

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

var queued = map[string]string{berthv1.QueueNameLabel: "team"}

func gpuPod(name string, ref metav1.OwnerReference, gpus int64, extra ...string) *corev1.Pod {
	l := map[string]string{berthv1.QueueNameLabel: "team"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name), Labels: l,
		OwnerReferences: []metav1.OwnerReference{ref}}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
	return p
}

// terminating marks a pod as being deleted; the finalizer keeps it in the
// fake client as it keeps it in a cluster.
func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = ptr.To(metav1.Now())
	p.Finalizers = []string{"test/hold"}
	return p
}

func ref(kind, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}
}

func sts(name, uid string, replicas int32) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), Labels: queued,
		Annotations: map[string]string{berthv1.GangAnnotation: berthv1.GangSet}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)}}
	s.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}
	return s
}

func fakeClient(objs ...client.Object) client.Client {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := berthv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	b := withControllerIndex(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...))
	for _, k := range []interface {
		jobs.Kind
		jobs.Resolver
	}{DeploymentKind{}, StatefulSetKind{}} {
		b = b.WithIndex(&corev1.Pod{}, jobs.KeyIndexKey(k.GVK()), func(o client.Object) []string {
			if key, ok := k.Key(o); ok {
				return []string{key}
			}
			return nil
		})
	}
	return b.Build()
}

// TestResolve: the gang of each key, what it is charged and why a gang of
// pods that are not a queued owner's cannot be queued.
func TestResolve(t *testing.T) {
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1", Labels: queued}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "rs1",
			OwnerReferences: []metav1.OwnerReference{ref("Deployment", "web", "d1")}}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine", UID: "rs2"}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "s1", Labels: queued}},
		sts("train", "s2", 2), sts("zero", "s3", 0),
		gpuPod("web-1-a", ref("ReplicaSet", "web-1", "rs1"), 1),
		gpuPod("mine-a", ref("ReplicaSet", "mine", "rs2"), 1),
		gpuPod("ghost-a", ref("ReplicaSet", "ghost", "rs9"), 1),
		gpuPod("db-0", ref("StatefulSet", "db", "s1"), 2),
		gpuPod("train-0", ref("StatefulSet", "train", "s2"), 1, berthv1.GangAnnotation, berthv1.GangSet),
		gpuPod("train-1", ref("StatefulSet", "train", "s2"), 3, berthv1.GangAnnotation, berthv1.GangSet),
		gpuPod("train-2", ref("StatefulSet", "train", "s2"), 1, berthv1.GangAnnotation, berthv1.GangSet),
		gpuPod("train-x", ref("StatefulSet", "train", "forged"), 1, berthv1.GangAnnotation, berthv1.GangSet),
		terminating(gpuPod("train-y", ref("StatefulSet", "train", "s2-old"), 1, berthv1.GangAnnotation, berthv1.GangSet)),
		gpuPod("zero-0", ref("StatefulSet", "zero", "s3"), 1, berthv1.GangAnnotation, berthv1.GangSet),
	}
	c := fakeClient(objs...)
	for _, tc := range []struct {
		name    string
		kind    jobs.Resolver
		key     string
		nilGang bool
		retry   bool
		count   int32
		gpus    string
		err     string
		held    []string
	}{
		{name: "a queued Deployment's replica is a gang of one", kind: DeploymentKind{}, key: "web-1-a", count: 1, gpus: "1"},
		{name: "a tenant's own ReplicaSet's pod is not queued", kind: DeploymentKind{}, key: "mine-a", err: "is not controlled by a Deployment"},
		{name: "a ReplicaSet the cache has not seen is retried", kind: DeploymentKind{}, key: "ghost-a", retry: true},
		{name: "no pod: no gang", kind: DeploymentKind{}, key: "gone", nilGang: true},
		{name: "a StatefulSet ordinal is a gang of one", kind: StatefulSetKind{}, key: "db-0", count: 1, gpus: "2"},
		{name: "a whole set is one gang of its replicas, charged for its largest pod", kind: StatefulSetKind{}, key: "train-set",
			count: 2, gpus: "3", held: []string{"train-2", "train-x"}},
		{name: "a whole set scaled to zero has no gang", kind: StatefulSetKind{}, key: "zero-set", nilGang: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.kind.Resolve(context.Background(), c, "ns", tc.key)
			if tc.retry {
				if err == nil {
					t.Fatal("want an error to retry")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.nilGang != (g == nil) {
				t.Fatalf("gang = %v, want nil %v", g, tc.nilGang)
			}
			if g == nil {
				return
			}
			sets, err := g.PodSets()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("PodSets error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q := sets[0].Requests["nvidia.com/gpu"]; len(sets) != 1 || sets[0].Count != tc.count || q.String() != tc.gpus {
				t.Errorf("pod sets = %+v, want one of %d pods of %s GPUs", sets, tc.count, tc.gpus)
			}
			var held []string
			for _, h := range g.(jobs.Releaser).Held() {
				held = append(held, h.Name)
			}
			if strings.Join(held, ",") != strings.Join(tc.held, ",") {
				t.Errorf("held = %v, want %v", held, tc.held)
			}
		})
	}
}

// TestSetIncomplete: a whole set waits, with an event that says so, until
// all its pods exist.
func TestSetIncomplete(t *testing.T) {
	c := fakeClient(sts("train", "s2", 3),
		gpuPod("train-0", ref("StatefulSet", "train", "s2"), 1, berthv1.GangAnnotation, berthv1.GangSet))
	g, err := StatefulSetKind{}.Resolve(context.Background(), c, "ns", "train-set")
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.PodSets()
	var ie *jobs.InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), `StatefulSet "train" has 1 of its 3 pods`) {
		t.Fatalf("PodSets error = %v, want the set incomplete", err)
	}
	if !g.IsSuspended() {
		t.Error("an incomplete set must be held")
	}
	if o := g.(jobs.Owned).Owners(); len(o) != 1 || o[0].Kind != "StatefulSet" || o[0].UID != "s2" {
		t.Errorf("owners = %v, want the StatefulSet", o)
	}
}

// TestReplicaFinished: a replica's Workload finishes with its pod.
func TestReplicaFinished(t *testing.T) {
	for _, tc := range []struct {
		phase               corev1.PodPhase
		finished, succeeded bool
	}{{corev1.PodRunning, false, false}, {corev1.PodSucceeded, true, true}, {corev1.PodFailed, true, false}} {
		p := gpuPod("web-1-a", ref("ReplicaSet", "web-1", "rs1"), 1)
		p.Status.Phase = tc.phase
		f, s, _ := DeploymentKind{}.Wrap(p).Finished()
		if f != tc.finished || s != tc.succeeded {
			t.Errorf("%s: Finished = %v %v, want %v %v", tc.phase, f, s, tc.finished, tc.succeeded)
		}
	}
}
