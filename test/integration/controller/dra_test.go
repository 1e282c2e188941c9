package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// draDriver publishes the suite's DRA devices; draClass, which selects
// them, is mapped to nvidia.com/gpu in the suite's berth.
const (
	draDriver = "gpu.example.com"
	draClass  = "gpu.example.com"
)

// draSlice publishes n devices of draDriver on node, in a pool named after
// the node.
func draSlice(node string, n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: "gpu-" + string(rune('0'+i)),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("H200")}}})
	}
	return s
}

// draSetup creates, for one spec, a flavor with hostname topology, a
// ClusterQueue of 64 GPUs, a LocalQueue "team", the DeviceClass draClass
// selecting devices of draDriver whose model is model, a
// ResourceClaimTemplate "four-gpus" of it, and one Ready node without
// GPUs; it returns the namespace, the node's name and the class.
func draSetup(ctx context.Context, model string) (string, string, *resourcev1.DeviceClass) {
	ns := newNamespace(ctx)
	rf := builders.Flavor(ns, map[string]string{"example.com/pool": ns})
	rf.Spec.TopologyLevels = []string{corev1.LabelHostname}
	Expect(env.Client.Create(ctx, rf)).To(Succeed())
	cq := builders.ClusterQueue(ns).Quota(ns, builders.GPU, "64", "").Obj()
	Expect(env.Client.Create(ctx, cq)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", cq.Name))).To(Succeed())
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draClass}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: modelIs(model)}}},
	}}
	Expect(env.Client.Create(ctx, class)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, class)) })
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "four-gpus"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: draClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 4,
			}}},
		}}},
	}
	Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	node := ns + "-n1"
	readyNode(ctx, node, 0, map[string]string{"example.com/pool": ns})
	return ns, node, class
}

// modelIs is a selector of draDriver's devices of the model.
func modelIs(model string) string {
	return `device.driver == "` + draDriver + `" && device.attributes["` + draDriver + `"].model == "` + model + `"`
}

// draJob creates a host-bound Job of one pod claiming four-gpus.
func draJob(ctx context.Context, ns string) *batchv1.Job {
	job := builders.Job(ns, "dra", "team").Pods(1).Obj()
	job.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: corev1.LabelHostname}
	job.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("four-gpus")}}
	job.Spec.Template.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	return job
}

// publish creates the node's ResourceSlice of n devices.
func publish(ctx context.Context, node string, n int) {
	s := draSlice(node, n)
	Expect(env.Client.Create(ctx, s)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, s)) })
}

var _ = Describe("DRA devices as capacity", func() {
	It("counts a node's ResourceSlice devices of a mapped DeviceClass, less those allocated to claims", func(ctx SpecContext) {
		ns, node, _ := draSetup(ctx, "H200")

		By("holding a job of one 4-GPU claim while the node publishes no devices")
		job := draJob(ctx, ns)
		Eventually(pendingReason(ctx, job), timeout, interval).Should(And(
			HavePrefix(string(admission.ExceedsDomainCapacity)), ContainSubstring("has 0")))

		By("publishing four devices of which a claim holds one: three are free")
		held := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
			}}}},
		}
		Expect(env.Client.Create(ctx, held)).To(Succeed())
		held.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: draDriver, Pool: node, Device: "gpu-0",
		}}}}
		Expect(env.Client.Status().Update(ctx, held)).To(Succeed())
		publish(ctx, node, 4)
		Eventually(pendingReason(ctx, job), timeout, interval).Should(And(
			HavePrefix(string(admission.TopologyUnavailable)), ContainSubstring("most free: 3 nvidia.com/gpu")))
		Consistently(suspended(ctx, job), "1s", interval).Should(BeTrue())

		By("admitting the job onto the node once the claim lets its device go")
		Expect(env.Client.Delete(ctx, held)).To(Succeed())
		Eventually(templateSelector(ctx, job), timeout, interval).Should(HaveKeyWithValue(corev1.LabelHostname, node))
	})

	It("counts the node again when the DeviceClass comes to select its devices", func(ctx SpecContext) {
		ns, node, class := draSetup(ctx, "A100")
		publish(ctx, node, 4)
		job := draJob(ctx, ns)
		Eventually(pendingReason(ctx, job), timeout, interval).Should(And(
			HavePrefix(string(admission.ExceedsDomainCapacity)), ContainSubstring("has 0")), "the class selects no H200")

		Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(class), class); err != nil {
				return err
			}
			class.Spec.Selectors[0].CEL.Expression = modelIs("H200")
			return env.Client.Update(ctx, class)
		}, timeout, interval).Should(Succeed())
		Eventually(templateSelector(ctx, job), timeout, interval).Should(HaveKeyWithValue(corev1.LabelHostname, node))
	})
})

// nicClass is a DeviceClass the suite's berth does not map: its devices
// cost no quota.
const nicClass = "nic.example.com"

// firstAvailableSetup creates, for one spec, a flavor without topology, a
// ClusterQueue of quota GPUs, a LocalQueue "team", the unmapped DeviceClass
// nicClass, and a ResourceClaimTemplate "nic-or-gpus" of one request whose
// first alternative is one device of nicClass and whose second is gpus
// devices of draClass; it returns the namespace and the ClusterQueue.
func firstAvailableSetup(ctx context.Context, quota string, gpus int64) (string, *berthv1.ClusterQueue) {
	ns := newNamespace(ctx)
	Expect(env.Client.Create(ctx, builders.Flavor(ns, nil))).To(Succeed())
	cq := builders.ClusterQueue(ns).Quota(ns, builders.GPU, quota, "").Obj()
	Expect(env.Client.Create(ctx, cq)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", cq.Name))).To(Succeed())
	nic := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: nicClass}}
	Expect(env.Client.Create(ctx, nic)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, nic)) })
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nic-or-gpus"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "accel", FirstAvailable: []resourcev1.DeviceSubRequest{
				{Name: "nic", DeviceClassName: nicClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
				{Name: "gpus", DeviceClassName: draClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: gpus},
			}}},
		}}},
	}
	Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
	return ns, cq
}

// gpuUsage returns the GPUs the ClusterQueue's status reports in use.
func gpuUsage(ctx context.Context, name string) func(Gomega) string {
	return func(g Gomega) string {
		cq := &berthv1.ClusterQueue{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, cq)).To(Succeed())
		for _, fu := range cq.Status.FlavorsUsage {
			for _, r := range fu.Resources {
				if r.Name == builders.GPU {
					return r.Total.String()
				}
			}
		}
		return "0"
	}
}

var _ = Describe("DRA requests with alternatives", func() {
	It("charges a firstAvailable request whose first alternative is unmapped its GPU alternative", func(ctx SpecContext) {
		ns, cq := firstAvailableSetup(ctx, "3", 4)
		job := builders.Job(ns, "alt", "team").Pods(1).Obj()
		job.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "accel", ResourceClaimTemplateName: ptr.To("nic-or-gpus")}}
		job.Spec.Template.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "accel"}}
		Expect(env.Client.Create(ctx, job)).To(Succeed())

		By("charging the pod four GPUs, the most any alternative costs, not the NIC's nothing")
		Eventually(func(g Gomega) string {
			wl, err := workloadOf(ctx, job)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl.Spec.PodSets).To(HaveLen(1))
			return wl.Spec.PodSets[0].Requests.Name(builders.GPU, resource.DecimalSI).String()
		}, timeout, interval).Should(Equal("4"))

		By("holding the job while the queue has three GPUs")
		Eventually(pendingReason(ctx, job), timeout, interval).Should(Or(
			HavePrefix(string(admission.ExceedsMaxQuota)), HavePrefix(string(admission.InsufficientQuota))))
		Consistently(suspended(ctx, job), "1s", interval).Should(BeTrue())
		Expect(gpuUsage(ctx, cq.Name)(Default)).To(Equal("0"))

		By("admitting it, charged four GPUs, once the queue has four")
		Eventually(func() error {
			fresh := &berthv1.ClusterQueue{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cq), fresh); err != nil {
				return err
			}
			fresh.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("4")
			return env.Client.Update(ctx, fresh)
		}, timeout, interval).Should(Succeed())
		Eventually(suspended(ctx, job), timeout, interval).Should(BeFalse())
		Eventually(gpuUsage(ctx, cq.Name), timeout, interval).Should(Equal("4"))
	})
})
