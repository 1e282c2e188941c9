package provisioning_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/provisioning"
)

var _ = Describe("the ProvisioningRequest API", func() {
	It("is reported on flavors, and bookings wait for it until it is installed", func(ctx SpecContext) {
		// The suite starts without the CRD; when another spec installed it
		// already, this removes it again, which berth must notice too.
		removeAPI(ctx)
		tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 3, BackoffSeconds: 10})
		flavorCondition := func(g Gomega) metav1.Condition {
			rf := &berthv1.ResourceFlavor{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc.flavor), rf)).To(Succeed())
			for _, c := range rf.Status.Conditions {
				if c.Type == berthv1.ConditionProvisioningAvailable {
					return c
				}
			}
			return metav1.Condition{}
		}
		Eventually(func(g Gomega) {
			c := flavorCondition(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(berthv1.ReasonAPINotInstalled))
			g.Expect(c.Message).To(ContainSubstring(provisioning.CRDName))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

		tc.pool(ctx, "r1", 2, nil)
		_, wl := tc.job(ctx)
		p := tc.reserve(ctx, wl, tc.rack("r1"))
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			a := condition(got, berthv1.ConditionAdmitted)
			g.Expect(a.Reason).To(Equal(string(berthv1.ReasonWaitingForCapacity)))
			g.Expect(a.Message).To(Equal(provisioning.APIMissingMessage))
			g.Expect(got.Status.Admission).NotTo(BeNil())
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

		By("installing the CRD")
		installAPI(ctx)
		Eventually(func(g Gomega) {
			c := flavorCondition(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(berthv1.ReasonAPIAvailable))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		pr := request(ctx, tc.ns, p.RequestName)
		Expect(pr.Spec.ProvisioningClassName).To(Equal(autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp))
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(condition(got, berthv1.ConditionAdmitted).Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	})
})
