package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

var _ = Describe("API validation", func() {
	DescribeTable("rejects an invalid ClusterQueue with a message that says what to fix",
		func(ctx SpecContext, mutate func(*berthv1.ClusterQueue), want string) {
			cq := builders.ClusterQueue("invalid-cq").Cohort("c").Quota("h200", builders.GPU, "8", "").Obj()
			mutate(cq)
			err := env.Client.Create(ctx, cq)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("negative nominal quota", func(cq *berthv1.ClusterQueue) {
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("-1")
		}, `nominalQuota: Invalid value: "-1": must not be negative`),
		Entry("borrowingLimit without a cohort", func(cq *berthv1.ClusterQueue) {
			cq.Spec.Cohort = ""
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].BorrowingLimit = ptr.To(resource.MustParse("4"))
		}, "borrowingLimit and lendingLimit require a cohort"),
		Entry("lendingLimit above nominal quota", func(cq *berthv1.ClusterQueue) {
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].LendingLimit = ptr.To(resource.MustParse("9"))
		}, "lendingLimit: Invalid value: \"9\": must not exceed nominalQuota (8)"),
		Entry("flavor quota for a resource the group does not cover", func(cq *berthv1.ClusterQueue) {
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].Name = "cpu"
		}, "each flavor must list quota for exactly the group's coveredResources"),
		Entry("a flavor in two resource groups", func(cq *berthv1.ClusterQueue) {
			cq.Spec.ResourceGroups = append(cq.Spec.ResourceGroups, *cq.Spec.ResourceGroups[0].DeepCopy())
			cq.Spec.ResourceGroups[1].CoveredResources[0] = "cpu"
			cq.Spec.ResourceGroups[1].Flavors[0].Resources[0].Name = "cpu"
		}, "a flavor belongs to one group"),
		Entry("unknown queueing strategy", func(cq *berthv1.ClusterQueue) {
			cq.Spec.QueueingStrategy = "Random"
		}, "supported values: \"StrictFIFO\", \"BestEffortFIFO\""),
	)

	It("accepts a ClusterQueue without quota yet", func(ctx SpecContext) {
		// An empty spec once failed the cohort rule with "no such key".
		cq := &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "empty-cq"}}
		Expect(env.Client.Create(ctx, cq, client.DryRunAll)).To(Succeed())
	})

	DescribeTable("validates topology and capacity objects, saying what to fix",
		func(ctx SpecContext, obj client.Object, want string) {
			err := env.Client.Create(ctx, obj)
			if want == "" {
				Expect(err).NotTo(HaveOccurred())
				Expect(env.Client.Delete(ctx, obj)).To(Succeed())
				return
			}
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry("a flavor naming a topology level twice",
			&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "twice"},
				Spec: berthv1.ResourceFlavorSpec{TopologyLevels: []string{"rack", "rack"}}},
			"topologyLevels must not repeat a key"),
		Entry("a provisioning mode that does not exist",
			&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "mode"},
				Spec: berthv1.ResourceFlavorSpec{Provisioning: &berthv1.ProvisioningPolicy{Mode: "Sometimes"}}},
			`supported values: "Never", "IfNeeded", "Always"`),
		Entry("single-pod jobs left to the autoscaler by a flavor that books every admission",
			&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "always-autoscaler"},
				Spec: berthv1.ResourceFlavorSpec{Provisioning: &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningAlways,
					SinglePodJobs: berthv1.SinglePodJobsAutoscaler}}},
			"singlePodJobs: Autoscaler contradicts mode: Always, which books capacity for every admission: set mode: IfNeeded"),
		Entry("a single-pod policy that does not exist",
			&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "single-sometimes"},
				Spec: berthv1.ResourceFlavorSpec{Provisioning: &berthv1.ProvisioningPolicy{SinglePodJobs: "Sometimes"}}},
			`supported values: "Book", "Autoscaler"`),
		Entry("single-pod jobs left to the autoscaler by a flavor that books IfNeeded",
			&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "ifneeded-autoscaler"},
				Spec: berthv1.ResourceFlavorSpec{Provisioning: &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded,
					SinglePodJobs: berthv1.SinglePodJobsAutoscaler}}},
			""),
		Entry("a pool whose minimum exceeds its maximum", capacityPool("min-max", 3, 2),
			"minNodes must not exceed maxNodes"),
		Entry("a pool with only a maximum", capacityPool("max-only", 0, 2), ""),
		Entry("a pool without allocatable capacity",
			&berthv1.CapacityPool{ObjectMeta: metav1.ObjectMeta{Name: "empty"},
				Spec: berthv1.CapacityPoolSpec{Flavor: "h200", MaxNodes: 1}},
			"spec.nodeTemplate.allocatable"),
		Entry("a pool whose nodes publish DRA devices", poolWithDevices("devices", 64, 64), ""),
		Entry("a pool whose nodes would publish more devices than one ResourceSlice holds",
			poolWithDevices("too-many", 100, 29), "a node publishes at most 128 devices"),
		Entry("a pool naming two device entries alike",
			func() client.Object {
				cp := poolWithDevices("twice", 1, 1)
				cp.Spec.NodeTemplate.Devices[1].Name = cp.Spec.NodeTemplate.Devices[0].Name
				return cp
			}(), "Duplicate value"),
		Entry("a pool whose devices' driver is not a DNS subdomain",
			func() client.Object {
				cp := poolWithDevices("driver", 1, 1)
				cp.Spec.NodeTemplate.Devices[0].Driver = "GPU_Driver"
				return cp
			}(), "spec.nodeTemplate.devices[0].driver"),
	)

	It("keeps a LocalQueue's ClusterQueue immutable", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		lq := builders.LocalQueue(ns, "team", "cq-a")
		Expect(env.Client.Create(ctx, lq)).To(Succeed())
		// A merge patch carries no resourceVersion, so berth's status writes
		// cannot make it conflict: only validation can reject it.
		base := lq.DeepCopy()
		lq.Spec.ClusterQueue = "cq-b"
		err := env.Client.Patch(ctx, lq, client.MergeFrom(base))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("clusterQueue is immutable"))
	})
})

// capacityPool is a pool of 8-GPU nodes of flavor h200.
func capacityPool(name string, minNodes, maxNodes int32) *berthv1.CapacityPool {
	return &berthv1.CapacityPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.CapacityPoolSpec{Flavor: "h200", MinNodes: minNodes, MaxNodes: maxNodes,
			NodeTemplate: berthv1.NodeTemplate{Allocatable: corev1.ResourceList{builders.GPU: resource.MustParse("8")}}}}
}

// poolWithDevices is a pool whose nodes publish a and b devices of two
// drivers.
func poolWithDevices(name string, a, b int32) *berthv1.CapacityPool {
	cp := capacityPool(name, 0, 1)
	cp.Spec.NodeTemplate.Devices = []berthv1.TemplateDevices{
		{Name: "gpu", Driver: "gpu.example.com", Count: a,
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: ptr.To("NVIDIA H200")}},
			Capacity:   map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("143771Mi")}},
		{Name: "nic", Driver: "net.example.com", Count: b},
	}
	return cp
}
