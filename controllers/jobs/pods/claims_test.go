package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/berth-dev/berth/controllers/jobs"
)

// gpuClaim is a device claim of n devices of class.
func gpuClaim(class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: n}}}}}
}

// TestCreateCountsClaims: a pod created ungated into an admitted gang counts
// what its DRA claims cost with its containers' requests, so a pod of the
// tenant's own that claims its Job with a ResourceClaimTemplate, or an
// existing ResourceClaim, of eight GPUs does not run them on a place
// admitted for one. A claim berth cannot count refuses the pod. Without a
// device class mapping berth counts no claim, for jobs as for their pods.
func TestCreateCountsClaims(t *testing.T) {
	g := newGang(t)
	exact := resourcev1.DeviceAllocationModeExactCount
	objs := func() []client.Object {
		return []client.Object{
			&resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "eight"},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: gpuClaim("gpu.nvidia.com", exact, 8)}},
			&resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "one"},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: gpuClaim("gpu.nvidia.com", exact, 1)}},
			&resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nics"},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: gpuClaim("nic.example.com", exact, 4)}},
			&resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "all"},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: gpuClaim("gpu.nvidia.com", resourcev1.DeviceAllocationModeAll, 0)}},
			&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared-eight"}, Spec: gpuClaim("gpu.nvidia.com", exact, 8)},
		}
	}
	mapping := jobs.DeviceClassMapping{"gpu.nvidia.com": {Resource: gpu, PerDevice: resource.MustParse("1")}}
	// claiming is a member whose GPU comes from its claims, not its
	// containers, as a Job's pods that use DRA are.
	claiming := func(claims ...corev1.PodResourceClaim) *corev1.Pod {
		return g.member("n1", func(p *corev1.Pod) {
			delete(p.Spec.Containers[0].Resources.Requests, gpu)
			p.Spec.ResourceClaims = claims
		})
	}
	template := func(name string) corev1.PodResourceClaim {
		return corev1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To(name)}
	}
	named := func(name string) corev1.PodResourceClaim {
		return corev1.PodResourceClaim{Name: "gpus", ResourceClaimName: ptr.To(name)}
	}
	tests := []struct {
		name    string
		mapping jobs.DeviceClassMapping
		created *corev1.Pod
		want    string
	}{
		{name: "a template of one GPU, as each pod was admitted with", mapping: mapping, created: claiming(template("one"))},
		{name: "a template of eight GPUs", mapping: mapping, created: claiming(template("eight")),
			want: "spec.resourceClaims: Forbidden: the pod requests 8 of nvidia.com/gpu (its containers and DRA claims together), " +
				"and each pod of pod set main of workload " + g.wl.Name + " was admitted with 1"},
		{name: "a GPU of its containers beside a claimed one", mapping: mapping,
			created: g.member("n1", func(p *corev1.Pod) { p.Spec.ResourceClaims = []corev1.PodResourceClaim{template("one")} }),
			want:    "the pod requests 2 of nvidia.com/gpu (its containers and DRA claims together)"},
		{name: "an existing claim of eight GPUs, by name", mapping: mapping, created: claiming(named("shared-eight")),
			want: "the pod requests 8 of nvidia.com/gpu (its containers and DRA claims together)"},
		{name: "a claim that does not exist yet, which could be made larger after the check", mapping: mapping, created: claiming(named("later")),
			want: `spec.resourceClaims: Forbidden: berth counts the devices of the pod's claims against what each pod of its gang was admitted with, ` +
				`and cannot count them: ResourceClaim "later" does not exist`},
		{name: "every device of a class", mapping: mapping, created: claiming(template("all")),
			want: "asks for all devices of class gpu.nvidia.com, which berth cannot count"},
		{name: "devices of a class berth does not count", mapping: mapping, created: claiming(template("nics"))},
		{name: "no mapping: no claim is counted", created: claiming(template("eight"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := fake.NewClientBuilder().WithScheme(g.scheme).WithObjects(g.wl.DeepCopy(), g.job.DeepCopy(), g.flavor.DeepCopy()).
				WithObjects(objs()...).Build()
			expectCreate(t, Validator{Workloads: jobs.Workloads{Cache: g.client(nil), API: api}, DeviceClasses: tt.mapping}, tt.created, tt.want)
		})
	}
}
