package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

var _ = Describe("stopping a ClusterQueue", func() {
	DescribeTable("holds new work, drains only when asked, and admits again when started",
		func(ctx SpecContext, policy berthv1.StopPolicy, drains bool) {
			ns := newNamespace(ctx)
			Expect(env.Client.Create(ctx, builders.Flavor(ns, nil))).To(Succeed())
			Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, "8", "").Obj())).To(Succeed())
			Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
			running := builders.Job(ns, "running", "team").Request(builders.GPU, "4").Obj()
			Expect(env.Client.Create(ctx, running)).To(Succeed())
			Eventually(suspended(ctx, running), timeout, interval).Should(BeFalse())

			setPolicy := func(p berthv1.StopPolicy) {
				cq := &berthv1.ClusterQueue{}
				Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
				base := cq.DeepCopy()
				cq.Spec.StopPolicy = p
				// No resourceVersion: berth's status writes cannot conflict.
				Expect(env.Client.Patch(ctx, cq, client.MergeFrom(base))).To(Succeed())
			}
			setPolicy(policy)
			Eventually(func(g Gomega) string {
				cq := &berthv1.ClusterQueue{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
				for _, c := range cq.Status.Conditions {
					if c.Type == berthv1.ConditionActive {
						return c.Reason
					}
				}
				return ""
			}, timeout, interval).Should(Equal(berthv1.ReasonStopped))

			waiting := builders.Job(ns, "waiting", "team").Request(builders.GPU, "4").Obj()
			Expect(env.Client.Create(ctx, waiting)).To(Succeed())
			Eventually(func(g Gomega) string {
				wl, err := workloadOf(ctx, waiting)
				g.Expect(err).NotTo(HaveOccurred())
				c := condition(wl, berthv1.ConditionQuotaReserved)
				g.Expect(c).NotTo(BeNil())
				return c.Reason
			}, timeout, interval).Should(Equal("ClusterQueueStopped"))

			if drains {
				Eventually(suspended(ctx, running), timeout, interval).Should(BeTrue())
				Eventually(func(g Gomega) {
					wl, err := workloadOf(ctx, running)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(wl.Status.Admission).To(BeNil())
					g.Expect(condition(wl, berthv1.ConditionEvicted)).NotTo(BeNil())
				}, timeout, interval).Should(Succeed())
			} else {
				Consistently(suspended(ctx, running), "1s", interval).Should(BeFalse(), "Hold keeps admitted work running")
			}
			Consistently(suspended(ctx, waiting), "1s", interval).Should(BeTrue())

			setPolicy(berthv1.StopPolicyNone)
			Eventually(suspended(ctx, waiting), timeout, interval).Should(BeFalse())
			Eventually(suspended(ctx, running), timeout, interval).Should(BeFalse())
		},
		Entry("Hold", berthv1.StopPolicyHold, false),
		Entry("HoldAndDrain", berthv1.StopPolicyHoldAndDrain, true),
	)
})
