package rayjob

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// TestIsChild: KubeRay's cluster is the one the RayJob's status names and
// its submitter Job the one named after the RayJob; each name is good for
// its own kind only, typed or read as metadata alone.
func TestIsChild(t *testing.T) {
	rj := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns"},
		Status: rayv1.RayJobStatus{RayClusterName: "train-x1"}}
	labels := map[string]string{originNameLabel: "train", originKindLabel: "RayJob"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels}
	}
	partial := func(kind, apiVersion, name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: kind, APIVersion: apiVersion}, ObjectMeta: meta(name)}
	}
	for _, tc := range []struct {
		name  string
		child client.Object
		want  bool
	}{
		{"the cluster the status names", &rayv1.RayCluster{ObjectMeta: meta("train-x1")}, true},
		{"the submitter Job", &batchv1.Job{ObjectMeta: meta("train")}, true},
		{"a cluster named after the RayJob", &rayv1.RayCluster{ObjectMeta: meta("train")}, false},
		{"a Job named as the cluster", &batchv1.Job{ObjectMeta: meta("train-x1")}, false},
		{"a cluster without KubeRay's labels", &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "train-x1", Namespace: "ns"}}, false},
		{"the cluster read as metadata", partial("RayCluster", "ray.io/v1", "train-x1"), true},
		{"a cluster named after the RayJob, read as metadata", partial("RayCluster", "ray.io/v1", "train"), false},
		{"the submitter read as metadata", partial("Job", "batch/v1", "train"), true},
		{"another kind named after the RayJob", partial("Deployment", "apps/v1", "train"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Kind{}).IsChild(rj, tc.child); got != tc.want {
				t.Errorf("IsChild = %v, want %v", got, tc.want)
			}
		})
	}
}
