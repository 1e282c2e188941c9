package provisioning_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

// draDriver is the fake DRA driver whose devices the kwok nodes publish;
// draClass selects its H200 devices and is mapped to nvidia.com/gpu in
// the suite's berth.
const (
	draDriver = "gpu.example.com"
	draClass  = "gpu.example.com"
)

// draDevices are eight devices of draDriver with the product's name.
func draDevices(product string) []resourcev1.Device {
	out := make([]resourcev1.Device, 8)
	for i := range out {
		out[i] = resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"productName": {StringValue: ptr.To(product)}}}
	}
	return out
}

// addDRANode creates a Ready kwok node of the rack with no GPU extended
// resource and a ResourceSlice of eight devices of product, both deleted
// after the spec.
func addDRANode(ctx context.Context, name string, labels map[string]string, product string) {
	node := controlplane.GPUNode(name, 0, labels)
	Expect(env.Client.Create(ctx, node)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, node)) })
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + draDriver},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: ptr.To(name),
			Pool: resourcev1.ResourcePool{Name: name, ResourceSliceCount: 1}, Devices: draDevices(product)},
	}
	Expect(env.Client.Create(ctx, s)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, s)) })
	Expect(controlplane.WaitForNodeReady(ctx, env.Client, name)).To(Succeed())
}

// draPool creates a CapacityPool of the rack whose nodes publish eight
// H200 devices of draDriver and no GPU extended resource.
func draPool(ctx context.Context, ns, rack string) *berthv1.CapacityPool {
	labels := rackLabels(ns, rack)
	labels[berthv1.CapacityPoolLabel] = ns + "-" + rack
	pool := &berthv1.CapacityPool{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + rack},
		Spec: berthv1.CapacityPoolSpec{Flavor: ns, MaxNodes: 2, NodeTemplate: berthv1.NodeTemplate{
			Labels: labels, Allocatable: controlplane.GPUNode("template", 0, nil).Status.Allocatable,
			Devices: []berthv1.TemplateDevices{{Name: "gpu", Driver: draDriver, Count: 8,
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: ptr.To("H200")}}}},
		}},
	}
	Expect(env.Client.Create(ctx, pool)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, pool)) })
	DeferCleanup(deleteNodesOf, pool.Name)
	return pool
}

// draGang submits a rack-bound Job of two pods, each claiming four devices
// of draClass through a ResourceClaimTemplate.
func draGang(ctx context.Context, ns, name string) *batchv1.Job {
	rct := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-gpus"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: draClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 4,
			}}},
		}}},
	}
	Expect(env.Client.Create(ctx, rct)).To(Succeed())
	job := gangJob(ns, name, 2, 3*time.Second)
	spec := &job.Spec.Template.Spec
	spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(rct.Name)}}
	// The devices are all it asks for: the ClusterQueue covers GPUs only.
	spec.Containers[0].Resources = corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	return job
}

var _ = Describe("DRA gangs", func() {
	BeforeEach(func(ctx SpecContext) {
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draClass}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: `device.driver == "` + draDriver + `" && device.attributes["` + draDriver + `"].productName == "H200"`}}},
		}}
		Expect(env.Client.Create(ctx, dc)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, dc)) })
	})

	It("admits a gang claiming devices only in the rack whose nodes publish them, and runs it there", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, nil)
		addDRANode(ctx, ns+"-r1-n0", rackLabels(ns, "r1"), "A100")
		addDRANode(ctx, ns+"-r2-n0", rackLabels(ns, "r2"), "H200")
		job := draGang(ctx, ns, "train")
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r2"}))
		Eventually(func(g Gomega) {
			g.Expect(workloadOf(ctx, g, job).Status.Provisioning).To(BeNil(), "the devices exist: nothing is booked")
		}, timeout, interval).Should(Succeed())
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("gets a node publishing the devices from the stand-in when none are free, and runs the gang there", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, nil)
		addDRANode(ctx, ns+"-r1-n0", rackLabels(ns, "r1"), "A100")
		pool := draPool(ctx, ns, "r2")
		job := draGang(ctx, ns, "train")

		By("booking a node of the r2 pool with a request whose templates carry the pods' claims")
		Eventually(func(g Gomega) {
			pr := request(ctx, g, job)
			g.Expect(pr.Spec.ProvisioningClassName).To(Equal(autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp))
			tmpl := &corev1.PodTemplate{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.PodSets[0].PodTemplateRef.Name}, tmpl)).To(Succeed())
			g.Expect(tmpl.Template.Spec.ResourceClaims).To(HaveLen(1))
			g.Expect(tmpl.Template.Spec.NodeSelector).To(HaveKeyWithValue(rackLabel, "r2"))
		}, timeout, interval).Should(Succeed())

		By("running both pods on the new node, whose ResourceSlice the stand-in published")
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r2"}))
		Expect(poolNodes(ctx, pool.Name)(Default)).To(Equal(1), "two pods of four devices share one node of eight")
		s := &resourcev1.ResourceSlice{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: pool.Name + "-0-" + draDriver}, s)).To(Succeed())
		Expect(s.Spec.NodeName).To(HaveValue(Equal(pool.Name + "-0")))
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})
})
