package jobs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodRequestsTakeLimitsAsRequests: a template's container or pod that
// states only a limit of a resource is charged its limit, as the API server
// defaults the requests of the pods made from it; a stated request wins,
// and the template itself is left as it was.
func TestPodRequestsTakeLimitsAsRequests(t *testing.T) {
	list := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	const gpu = "nvidia.com/gpu"
	container := func(name string, req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want corev1.ResourceList
	}{
		{name: "a GPU stated as a limit only", spec: corev1.PodSpec{Containers: []corev1.Container{container("c", nil, list(gpu, "1"))}},
			want: list(gpu, "1")},
		{name: "a request and a larger limit: the request", spec: corev1.PodSpec{Containers: []corev1.Container{
			container("c", list("cpu", "1"), list("cpu", "4", gpu, "2"))}}, want: list("cpu", "1", gpu, "2")},
		{name: "two containers, one with limits only", spec: corev1.PodSpec{Containers: []corev1.Container{
			container("a", list(gpu, "1"), nil), container("b", nil, list(gpu, "2", "memory", "1Gi"))}},
			want: list(gpu, "3", "memory", "1Gi")},
		{name: "an init container with limits only, larger than the containers", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{container("init", nil, list(gpu, "4"))},
			Containers:     []corev1.Container{container("c", nil, list(gpu, "1"))}}, want: list(gpu, "4")},
		{name: "nothing stated", spec: corev1.PodSpec{Containers: []corev1.Container{container("c", nil, nil)}}, want: list()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.spec.DeepCopy()
			got := PodRequests(&tc.spec)
			if len(got) != len(tc.want) {
				t.Fatalf("requests %v, want %v", got, tc.want)
			}
			for name, q := range tc.want {
				if g, ok := got[name]; !ok || g.Cmp(q) != 0 {
					t.Fatalf("requests %v, want %v", got, tc.want)
				}
			}
			for i := range before.Containers {
				if len(before.Containers[i].Resources.Requests) != len(tc.spec.Containers[i].Resources.Requests) {
					t.Fatalf("the template's container %d changed: %v", i, tc.spec.Containers[i].Resources)
				}
			}
		})
	}
}
