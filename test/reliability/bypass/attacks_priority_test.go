package bypass_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// Priority orders a ClusterQueue's workloads and decides whom preemption
// may evict, across every namespace that shares the queue. A PriorityClass
// is cluster-wide and any job may name one, so which namespace may take
// which class is the LocalQueue's, which only the platform team writes.
var _ = Describe("a tenant with the edit role who names a PriorityClass", func() {
	It("gets no job queued at a priority its LocalQueue does not grant, and cannot grant one", func(ctx SpecContext) {
		ns := newTeam(ctx, "8")
		mallory := editor(ctx, ns)
		high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}, Value: 1000}
		Expect(env.Client.Create(ctx, high)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, high))).To(Succeed())
		})
		held := func(job *batchv1.Job, class string) {
			Eventually(func(g Gomega) {
				wl := workloadOf(ctx, g, ns, string(job.UID))
				g.Expect(wl.Status.Admission).To(BeNil())
				g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", berthv1.ConditionQuotaReserved),
					HaveField("Reason", string(berthv1.ReasonPriorityClassNotAllowed)),
					HaveField("Message", ContainSubstring(`does not let its workloads take PriorityClass "`+class+`"`)))))
			}, timeout, interval).Should(Succeed())
		}

		By("labelling a job with a system PriorityClass, which every cluster has")
		system := gpuJob(ns, "system")
		system.Labels[berthv1.PriorityClassLabel] = "system-node-critical"
		Expect(mallory.Create(ctx, system)).To(Succeed())
		held(system, "system-node-critical")
		By("naming the platform's high class in the pod template")
		templated := gpuJob(ns, "templated")
		templated.Spec.Template.Spec.PriorityClassName = high.Name
		Expect(mallory.Create(ctx, templated)).To(Succeed())
		held(templated, high.Name)

		By("granting its LocalQueue the class itself")
		Eventually(func() error {
			lq := &berthv1.LocalQueue{}
			if err := mallory.Get(ctx, client.ObjectKey{Namespace: ns, Name: queue}, lq); err != nil {
				return err
			}
			base := lq.DeepCopy()
			lq.Spec.PriorityClasses = append(lq.Spec.PriorityClasses, high.Name)
			return mallory.Patch(ctx, lq, client.MergeFrom(base))
		}, timeout, interval).Should(MatchError(ContainSubstring("a tenant cannot change which PriorityClasses a LocalQueue's workloads may take")))
		expectNoPodOutsideQuota(ctx, ns)

		By("the platform team granting the high class: that job is admitted, the system one still waits")
		Expect(update(ctx, env.Client, &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: queue}},
			func(lq *berthv1.LocalQueue) { lq.Spec.PriorityClasses = []string{high.Name} })).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, ns, string(templated.UID))
			g.Expect(lifecycle.MayRun(lifecycle.PhaseOf(wl))).To(BeTrue())
			g.Expect(wl.Spec.Priority).To(BeEquivalentTo(1000))
		}, timeout, interval).Should(Succeed())
		held(system, "system-node-critical")
	})
})
