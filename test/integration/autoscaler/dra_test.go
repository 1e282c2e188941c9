package autoscaler_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
)

// draDriver is the fake DRA driver of the suite's device pools.
const draDriver = "gpu.example.com"

// devicePool creates a CapacityPool of the case whose nodes publish eight
// devices of draDriver with the given product, and no GPU extended
// resource.
func devicePool(ctx context.Context, name, caseID, product string) *berthv1.CapacityPool {
	cp := &berthv1.CapacityPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.CapacityPoolSpec{
			Flavor: "h200", MinNodes: 1, MaxNodes: 4,
			NodeTemplate: berthv1.NodeTemplate{
				Labels: map[string]string{caseLabel: caseID},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
					corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Devices: []berthv1.TemplateDevices{{Name: "gpu", Driver: draDriver, Count: 8,
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: ptr.To(product)}},
					Capacity:   map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("141Gi")},
				}},
			},
		},
	}
	Expect(env.Client.Create(ctx, cp)).To(Succeed())
	return cp
}

// claimTemplate creates a PodTemplate of the case whose pod claims its
// devices through the ResourceClaimTemplate claims (created apart, or
// not at all).
func claimTemplate(ctx context.Context, ns, name, caseID, claims string) {
	t := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{caseLabel: caseID},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(claims)}},
			Containers: []corev1.Container{{
				Name: "trainer", Image: "registry.example.com/trainer:latest",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
					Claims:   []corev1.ResourceClaim{{Name: "gpus"}},
				},
			}},
		}},
	}
	Expect(env.Client.Create(ctx, t)).To(Succeed())
}

// claimsOf creates a ResourceClaimTemplate for count devices of class.
func claimsOf(ctx context.Context, ns, name, class string, count int64) {
	rct := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
			}}},
		}}},
	}
	Expect(env.Client.Create(ctx, rct)).To(Succeed())
}

var _ = Describe("DRA", func() {
	var ns, c, class string

	BeforeEach(func(ctx SpecContext) {
		ns, c = newNamespace(ctx), newCase()
		class = c + "-h200"
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: `device.driver == "` + draDriver + `" && device.attributes["` + draDriver + `"].productName == "H200"`}}},
		}}
		Expect(env.Client.Create(ctx, dc)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, dc)) })
	})

	It("grows only a pool whose nodes' devices satisfy the claims, and publishes the new node's ResourceSlice", func(ctx SpecContext) {
		a100 := devicePool(ctx, c+"-a100", c, "A100")
		h200 := devicePool(ctx, c+"-h200", c, "H200")
		claimsOf(ctx, ns, "four-gpus", class, 4)
		claimTemplate(ctx, ns, "gang", c, "four-gpus")

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 2, nil)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonProvisioned)
		Expect(pr.Status.ProvisioningClassDetails).To(HaveKeyWithValue(autoscaler.DetailPools, autoscalingv1.Detail(h200.Name)),
			"the A100 pool comes first by name but its devices are not of the class")
		var node corev1.Node
		Eventually(func(g Gomega) {
			nodes := poolNodes(ctx, h200.Name)
			g.Expect(nodeNames(nodes)).To(ConsistOf(h200.Name+"-0"), "two pods of four devices share one node of eight")
			node = nodes[0]
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Expect(poolNodes(ctx, a100.Name)).To(BeEmpty())

		s := &resourcev1.ResourceSlice{}
		Eventually(func() error {
			return env.Client.Get(ctx, client.ObjectKey{Name: node.Name + "-" + draDriver}, s)
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Expect(s.Spec.Driver).To(Equal(draDriver))
		Expect(s.Spec.NodeName).To(HaveValue(Equal(node.Name)))
		Expect(s.Spec.Pool.Name).To(Equal(node.Name))
		Expect(s.Spec.Devices).To(HaveLen(8))
		Expect(s.Spec.Devices[0].Attributes).To(HaveKeyWithValue(resourcev1.QualifiedName("productName"), HaveField("StringValue", HaveValue(Equal("H200")))))
		Expect(s.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Node"), HaveField("UID", node.UID))),
			"the slice goes with its node")
	})

	It("answers CapacityIsNotFound when no pool's devices can satisfy one pod", func(ctx SpecContext) {
		a100 := devicePool(ctx, c+"-a100", c, "A100")
		claimsOf(ctx, ns, "four-gpus", class, 4)
		claimTemplate(ctx, ns, "gang", c, "four-gpus")

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 1, nil)
		cond := expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)
		Expect(cond.Message).To(ContainSubstring("pool " + a100.Name + ": one node's devices cannot satisfy one pod's resource claims"))
		Consistently(func() []corev1.Node { return poolNodes(ctx, a100.Name) }).WithTimeout(timeout / 30).WithPolling(interval).Should(BeEmpty())
	})

	It("answers CapacityIsNotFound, not Failed, for a request whose ResourceClaimTemplate does not exist", func(ctx SpecContext) {
		devicePool(ctx, c+"-h200", c, "H200")
		claimTemplate(ctx, ns, "gang", c, "missing-claims")
		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 1, nil)
		cond := expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)
		Expect(cond.Message).To(ContainSubstring("ResourceClaimTemplate " + ns + "/missing-claims"))
		Expect(meta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.Failed)).To(BeFalse())
	})
})
