package raycluster_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/raycluster"
	"github.com/berth-dev/berth/controllers/jobs/rayjob"
)

// TestDefaulter: a queued cluster is held, an autoscaling one starts at its
// minimum, and the cluster KubeRay makes for a queued RayJob — labelled
// with the RayJob's queue — is left to the RayJob.
func TestDefaulter(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := rayv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	parent := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "u1", Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Status: rayv1.RayJobStatus{RayClusterName: "train-x1"}}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(parent).Build()
	d := raycluster.Defaulter{Readers: jobs.Workloads{Cache: api, API: api}, Parents: []jobs.Kind{rayjob.Kind{}}}
	newCluster := func(name string, autoscaling bool) *rayv1.RayCluster {
		return &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
			Spec: rayv1.RayClusterSpec{EnableInTreeAutoscaling: ptr.To(autoscaling), WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "gpu", Replicas: ptr.To[int32](3), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](5), NumOfHosts: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}}}}}}}
	}

	rc := newCluster("serve", true)
	if err := d.Default(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(rc.Spec.Suspend, false) || *rc.Spec.WorkerGroupSpecs[0].Replicas != 1 {
		t.Errorf("suspend %v, replicas %d; want held at minReplicas 1", rc.Spec.Suspend, *rc.Spec.WorkerGroupSpecs[0].Replicas)
	}

	child := newCluster("train-x1", false)
	child.Labels["ray.io/originated-from-cr-name"] = "train"
	child.Labels["ray.io/originated-from-crd"] = "RayJob"
	child.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "train", UID: "u1", Controller: ptr.To(true)}}
	if err := d.Default(context.Background(), child); err != nil {
		t.Fatal(err)
	}
	if child.Spec.Suspend != nil {
		t.Errorf("a queued RayJob's cluster was held: suspend %v", *child.Spec.Suspend)
	}

	// The cache may still hold the RayJob as it was before KubeRay named
	// its cluster in the status: the API server is asked before the
	// cluster is taken for one of its own.
	stale := parent.DeepCopy()
	stale.Status.RayClusterName = ""
	lagging := raycluster.Defaulter{Readers: jobs.Workloads{Cache: fake.NewClientBuilder().WithScheme(scheme).WithObjects(stale).Build(), API: api},
		Parents: []jobs.Kind{rayjob.Kind{}}}
	early := newCluster("train-x1", false)
	early.Labels, early.OwnerReferences = child.Labels, child.OwnerReferences
	if err := lagging.Default(context.Background(), early); err != nil {
		t.Fatal(err)
	}
	if early.Spec.Suspend != nil {
		t.Errorf("a queued RayJob's cluster was held while the cache lagged: suspend %v", *early.Spec.Suspend)
	}

	forged := newCluster("train-forged", false)
	forged.Labels["ray.io/originated-from-cr-name"] = "train"
	forged.Labels["ray.io/originated-from-crd"] = "RayJob"
	forged.OwnerReferences = child.OwnerReferences
	if err := d.Default(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(forged.Spec.Suspend, false) {
		t.Error("a cluster that only points its controller at a queued RayJob was not held")
	}
}
