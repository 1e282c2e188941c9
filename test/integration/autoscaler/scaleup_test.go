package autoscaler_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/test/controlplane"
)

const atomicScaleUp = autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp

var _ = Describe("best-effort-atomic-scale-up", func() {
	It("creates exactly the nodes needed, in the pool of the pods' rack only", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		rackA := pool(ctx, c+"-rack-a", c, 4, map[string]string{"topology.berth.dev/rack": "a"}, nil)
		rackB := pool(ctx, c+"-rack-b", c, 4, map[string]string{"topology.berth.dev/rack": "b"}, nil)
		template(ctx, ns, "rack-a-gang", c, 8, map[string]string{"topology.berth.dev/rack": "a"})

		pr := request(ctx, ns, "gang", atomicScaleUp, "rack-a-gang", 3, nil)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonProvisioned)
		Expect(pr.Status.Conditions).To(ContainElement(And(HaveField("Type", autoscalingv1.Accepted), HaveField("Status", metav1.ConditionTrue))))
		Expect(pr.Status.ProvisioningClassDetails).To(HaveKeyWithValue(autoscaler.DetailPools, autoscalingv1.Detail(rackA.Name)))

		var nodes []corev1.Node
		Eventually(func() []string { nodes = poolNodes(ctx, rackA.Name); return nodeNames(nodes) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(rackA.Name+"-0", rackA.Name+"-1", rackA.Name+"-2"))
		Expect(poolNodes(ctx, rackB.Name)).To(BeEmpty())
		n := nodes[0]
		Expect(n.Labels).To(HaveKeyWithValue(berthv1.CapacityPoolLabel, rackA.Name))
		Expect(n.Labels).To(HaveKeyWithValue("topology.berth.dev/rack", "a"))
		Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelHostname, n.Name))
		Expect(n.Annotations).To(HaveKeyWithValue(controlplane.FakeNodeAnnotation, controlplane.FakeNodeAnnotationValue))
		gpu := n.Status.Allocatable[controlplane.GPUResource]
		Expect(gpu.Value()).To(Equal(int64(8)))
		expectNoPoolStatus(ctx, rackA.Name)
	})

	It("answers Provisioned before the nodes join, and counts the nodes still coming against the pool", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		slow := pool(ctx, c+"-slow", c, 3, nil, map[string]string{autoscaler.LatencyAnnotation: "1h"})
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 2, nil)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonProvisioned)
		Expect(poolNodes(ctx, slow.Name)).To(BeEmpty(), "the nodes join after the latency")

		By("a second request finds the pool's room taken by the nodes still coming")
		second := request(ctx, ns, "second", atomicScaleUp, "gang", 2, nil)
		expectCondition(ctx, second, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)

		fakeClock.Step(time.Hour)
		Eventually(func() []string { return nodeNames(poolNodes(ctx, slow.Name)) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(slow.Name+"-0", slow.Name+"-1"))
		Expect(condition(ctx, Default, second, autoscalingv1.Failed)).To(BeNil())
	})

	It("grows one node group per request: two pools that only together hold it create nothing", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		a := pool(ctx, c+"-a", c, 1, nil, nil)
		b := pool(ctx, c+"-b", c, 1, nil, nil)
		template(ctx, ns, "gang", c, 8, nil)
		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 2, nil)
		cond := expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)
		Expect(cond.Message).To(And(ContainSubstring("pod set 0: 2 of 2 pods do not fit"),
			ContainSubstring("pool "+a.Name+": 1 more nodes allowed"), ContainSubstring("pool "+b.Name+": 1 more nodes allowed")))
		Expect(poolNodes(ctx, a.Name)).To(BeEmpty())
		Expect(poolNodes(ctx, b.Name)).To(BeEmpty())
	})

	It("answers CapacityIsNotFound when maxNodes cannot hold the request, retries with a doubling backoff, and never fails it", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		small := pool(ctx, c+"-small", c, 2, nil, nil)
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 3, nil)
		first := expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)
		Expect(first.Message).To(And(ContainSubstring("CA will try to find it later"), ContainSubstring("pod set 0: 3 of 3 pods do not fit"),
			ContainSubstring("pool "+small.Name+": 2 more nodes allowed (maxNodes 2")))
		Expect(poolNodes(ctx, small.Name)).To(BeEmpty())
		Eventually(func(g Gomega) string { return retries(ctx, g, pr) }).WithTimeout(timeout).WithPolling(interval).Should(Equal("1"))

		By("tried again after one minute, then after two more: each answer moves the condition's time")
		fakeClock.Step(retryBackoff)
		Eventually(func(g Gomega) string { return retries(ctx, g, pr) }).WithTimeout(timeout).WithPolling(interval).Should(Equal("2"))
		second := condition(ctx, Default, pr, autoscalingv1.Provisioned)
		Expect(second.LastTransitionTime.Time).To(BeTemporally(">", first.LastTransitionTime.Time))
		fakeClock.Step(retryBackoff)
		Consistently(func(g Gomega) string { return retries(ctx, g, pr) }).WithTimeout(time.Second).WithPolling(interval).Should(Equal("2"))
		fakeClock.Step(retryBackoff)
		Eventually(func(g Gomega) string { return retries(ctx, g, pr) }).WithTimeout(timeout).WithPolling(interval).Should(Equal("3"))
		Expect(condition(ctx, Default, pr, autoscalingv1.Failed)).To(BeNil())

		By("once the node group may grow, the next try provisions it")
		Expect(env.Client.Patch(ctx, small, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"maxNodes":3}}`)))).To(Succeed())
		fakeClock.Step(4 * retryBackoff)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonProvisioned)
		Eventually(func() []corev1.Node { return poolNodes(ctx, small.Name) }).WithTimeout(timeout).WithPolling(interval).Should(HaveLen(3))
	})

	It("uses free capacity on existing nodes before creating any", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		existing := readyNode(ctx, c+"-n0", c, 8)
		cp := pool(ctx, c+"-pool", c, 4, nil, nil)
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "fits", atomicScaleUp, "gang", 1, nil)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonCapacityFound)
		Expect(pr.Status.ProvisioningClassDetails).To(HaveKeyWithValue(autoscaler.DetailNodes, autoscalingv1.Detail(existing.Name)))
		Expect(poolNodes(ctx, cp.Name)).To(BeEmpty())
	})

	It("answers CapacityIsNotFound while the pool's cloud is out of stock, and provisions once it is back", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		cp := pool(ctx, c+"-empty", c, 4, nil, map[string]string{autoscaler.StockoutAnnotation: "true"})
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 2, nil)
		cond := expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)
		Expect(cond.Message).To(ContainSubstring("pool " + cp.Name + ": out of stock"))
		Expect(condition(ctx, Default, pr, autoscalingv1.Failed)).To(BeNil())
		Expect(poolNodes(ctx, cp.Name)).To(BeEmpty())

		Expect(env.Client.Patch(ctx, cp, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"`+autoscaler.StockoutAnnotation+`":null}}}`)))).To(Succeed())
		fakeClock.Step(retryBackoff)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonProvisioned)
	})

	It("delivers only half the nodes on a partial failure, stays Provisioned, and expires its booking", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		cp := pool(ctx, c+"-flaky", c, 4, nil, map[string]string{autoscaler.PartialFailureAnnotation: "true"})
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 4, nil)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonProvisioned)
		Eventually(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(timeout).WithPolling(interval).Should(HaveLen(2))
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(time.Second).WithPolling(interval).Should(HaveLen(2))
		fakeClock.Step(bookingTTL)
		expectCondition(ctx, pr, autoscalingv1.BookingExpired, metav1.ConditionTrue, autoscaler.ReasonBookingExpired)
		Expect(condition(ctx, Default, pr, autoscalingv1.Failed)).To(BeNil())
	})

	It("fails a request whose PodTemplate does not exist, as cluster-autoscaler does", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		pool(ctx, c+"-pool", c, 4, nil, nil)
		pr := request(ctx, ns, "orphan", atomicScaleUp, "missing", 1, nil)
		cond := expectCondition(ctx, pr, autoscalingv1.Failed, metav1.ConditionTrue, autoscaler.ReasonFailedToCreatePod)
		Expect(cond.Message).To(ContainSubstring(ns + "/missing"))
	})
})
