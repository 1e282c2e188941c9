package provisioning_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/jobsuite"
)

// priorityClass creates a PriorityClass for one spec.
func priorityClass(ctx context.Context, name string, value int32) {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	Expect(env.Client.Create(ctx, pc)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, pc)) })
}

var _ = Describe("preempting a gang that waits for its capacity", func() {
	It("releases its quota at once, withdraws its ProvisioningRequest, and books again later", func(ctx SpecContext) {
		// r2 has one node and no pool; r1 has a pool and no node: the
		// two-pod gang can only be placed on two new nodes of r1.
		ns := rackSetup(ctx, []string{"r2"}, map[string]int32{"r1": 2})
		// CPU is quota of its own flavor, which books nothing: a CPU-only
		// job preempts for it by quota alone (a gang of a flavor that books
		// capacity preempts only to free a domain, see docs/admission.md).
		cpuFlavor := &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: ns + "-cpu"},
			Spec: berthv1.ResourceFlavorSpec{NodeLabels: map[string]string{poolLabel: ns}}}
		Expect(env.Client.Create(ctx, cpuFlavor)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, cpuFlavor)) })
		cq := &berthv1.ClusterQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
		cq.Spec.ResourceGroups = append(cq.Spec.ResourceGroups, berthv1.ResourceGroup{
			CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []berthv1.FlavorQuotas{{Name: cpuFlavor.Name, Resources: []berthv1.ResourceQuota{
				{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}}},
		})
		cq.Spec.Preemption.WithinClusterQueue = berthv1.PreemptLowerPriority
		Expect(env.Client.Update(ctx, cq)).To(Succeed())
		priorityClass(ctx, ns+"-low", 10)
		priorityClass(ctx, ns+"-high", 1000)

		By("holding the autoscaler's answer, so the gang stays reserved and waiting")
		Expect(stopAutoscale()).To(Succeed())
		restarted := false
		DeferCleanup(func(ctx context.Context) error {
			if restarted {
				return nil
			}
			var err error
			stopAutoscale, err = env.StartAutoscaler(ctx, autoscalerOptions)
			return err
		})
		low := gangJob(ns, "low", 2, 3*time.Second)
		low.Spec.Template.Spec.PriorityClassName = ns + "-low"
		low.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		Expect(env.Client.Create(ctx, low)).To(Succeed())
		var first *autoscalingv1.ProvisioningRequest
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, low)
			g.Expect(lifecycle.PhaseOf(wl)).To(Equal(lifecycle.Reserved))
			g.Expect(wl.Status.Admission.Topology.Values).To(Equal([]string{"zone-a", "r1"}))
			first = request(ctx, g, low)
		}, timeout, interval).Should(Succeed())

		By("a higher-priority CPU-only job that fits the existing node but not the CPU quota")
		urgent := gangJob(ns, "urgent", 1, 3*time.Second)
		delete(urgent.Annotations, berthv1.TopologyRequiredAnnotation)
		urgent.Spec.Template.Spec.PriorityClassName = ns + "-high"
		urgent.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		Expect(env.Client.Create(ctx, urgent)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, low)
			g.Expect(wl.Status.Admission).To(BeNil())
			ev := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionEvicted)
			g.Expect(ev).NotTo(BeNil())
			g.Expect(ev.Reason).To(Equal(string(berthv1.ReasonPreempted)))
			g.Expect(wl.Status.Provisioning.State).To(Equal(berthv1.ProvisioningCancelled))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionQuotaReserved)).To(BeFalse())
			// The condition says who preempted it; no event per victim.
			g.Expect(ev.Message).To(ContainSubstring("preempted to admit"))
			g.Expect(jobsuite.EventReasons(ctx, env.Client, ns, wl.Name)(g)).NotTo(ContainElement(HavePrefix("Preempted")))
		}, timeout, interval).Should(Succeed())
		Eventually(func() error {
			return env.Client.Get(ctx, client.ObjectKeyFromObject(first), &autoscalingv1.ProvisioningRequest{})
		}, timeout, interval).Should(Satisfy(func(err error) bool { return client.IgnoreNotFound(err) == nil && err != nil }),
			"the withdrawn booking's request is deleted, so the autoscaler creates no node for it")
		Eventually(jobsuite.Completed(ctx, env.Client, urgent), timeout, interval).Should(BeTrue(), "the preemptor runs on the existing node")
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(0), "no node was created for the withdrawn booking")

		By("answering again: the gang books its capacity anew and runs")
		var err error
		stopAutoscale, err = env.StartAutoscaler(ctx, autoscalerOptions)
		Expect(err).NotTo(HaveOccurred())
		restarted = true
		Eventually(racksOf(ctx, low), timeout, interval).Should(Equal([]string{"r1"}))
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, low)
			g.Expect(wl.Status.Provisioning.RequestName).NotTo(Equal(first.Name), "a new request for the new attempt")
		}, timeout, interval).Should(Succeed())
		Eventually(jobsuite.Completed(ctx, env.Client, low), timeout, interval).Should(BeTrue())
	})
})
