package autoscaler_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

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

		nodes := poolNodes(ctx, rackA.Name)
		Expect(nodeNames(nodes)).To(ConsistOf(rackA.Name+"-0", rackA.Name+"-1", rackA.Name+"-2"))
		Expect(poolNodes(ctx, rackB.Name)).To(BeEmpty())
		n := nodes[0]
		Expect(n.Labels).To(HaveKeyWithValue(berthv1.CapacityPoolLabel, rackA.Name))
		Expect(n.Labels).To(HaveKeyWithValue("topology.berth.dev/rack", "a"))
		Expect(n.Labels).To(HaveKeyWithValue(corev1.LabelHostname, n.Name))
		Expect(n.Annotations).To(HaveKeyWithValue(controlplane.FakeNodeAnnotation, controlplane.FakeNodeAnnotationValue))
		gpu := n.Status.Allocatable[controlplane.GPUResource]
		Expect(gpu.Value()).To(Equal(int64(8)))

		poolStatus(ctx, rackA.Name, 3, 0)
		poolStatus(ctx, rackB.Name, 0, 0)
	})

	It("counts nodes in flight in the pool status until the provisioning latency has passed", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		slow := pool(ctx, c+"-slow", c, 4, nil, map[string]string{autoscaler.LatencyAnnotation: "1h"})
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 2, nil)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonScaleUpInProgress)
		poolStatus(ctx, slow.Name, 0, 2)
		Expect(poolNodes(ctx, slow.Name)).To(BeEmpty())

		fakeClock.Step(time.Hour)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonProvisioned)
		poolStatus(ctx, slow.Name, 2, 0)
	})

	It("fails without creating nodes when maxNodes cannot hold the request", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		small := pool(ctx, c+"-small", c, 2, nil, nil)
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 3, nil)
		cond := expectCondition(ctx, pr, autoscalingv1.Failed, metav1.ConditionTrue, autoscaler.ReasonScaleUpImpossible)
		Expect(cond.Message).To(ContainSubstring("pod set 0: 1 of 3 pods do not fit"))
		Expect(cond.Message).To(ContainSubstring("pool " + small.Name + ": 0 more nodes allowed (maxNodes 2"))
		Expect(poolNodes(ctx, small.Name)).To(BeEmpty())
		poolStatus(ctx, small.Name, 0, 0)
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

	It("fails a scale-up from a pool that is out of stock", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		cp := pool(ctx, c+"-empty", c, 4, nil, map[string]string{autoscaler.StockoutAnnotation: "true"})
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 2, nil)
		cond := expectCondition(ctx, pr, autoscalingv1.Failed, metav1.ConditionTrue, autoscaler.ReasonScaleUpFailed)
		Expect(cond.Message).To(ContainSubstring("pool " + cp.Name + " is out of stock"))
		Expect(poolNodes(ctx, cp.Name)).To(BeEmpty())
		poolStatus(ctx, cp.Name, 0, 0)
	})

	It("rolls a partly failed scale-up back: the created nodes are deleted", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		cp := pool(ctx, c+"-flaky", c, 4, nil, map[string]string{autoscaler.PartialFailureAnnotation: "true"})
		template(ctx, ns, "gang", c, 8, nil)

		pr := request(ctx, ns, "gang", atomicScaleUp, "gang", 4, nil)
		cond := expectCondition(ctx, pr, autoscalingv1.Failed, metav1.ConditionTrue, autoscaler.ReasonScaleUpFailed)
		Expect(cond.Message).To(ContainSubstring("only 2 of 4 nodes could be created"))
		Expect(poolNodes(ctx, cp.Name)).To(BeEmpty())
		poolStatus(ctx, cp.Name, 0, 0)
		Expect(condition(ctx, Default, pr, autoscalingv1.Provisioned).Status).To(Equal(metav1.ConditionFalse))
	})
})
