package operators_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/test/jobsuite"
)

// expectHandedOff waits until pods, all of them bound, joined the PodGroup
// group and kube-scheduler reports the group placed.
func expectHandedOff(ctx SpecContext, g Gomega, ns, group string, pods []corev1.Pod, n int) {
	g.Expect(pods).To(HaveLen(n))
	for _, p := range pods {
		g.Expect(p.Spec.SchedulingGroup).NotTo(BeNil(), "pod %s joined a group at creation", p.Name)
		g.Expect(p.Spec.SchedulingGroup.PodGroupName).To(HaveValue(Equal(group)))
		g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
	}
	pg := &schedulingv1beta1.PodGroup{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: group}, pg)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)).To(BeTrue())
}

var _ = Describe("operator gangs handed to kube-scheduler's gang scheduling", func() {
	It("binds a JobSet's pods, made by two Job controllers, and a LeaderWorkerSet replica each through one PodGroup", func(ctx SpecContext) {
		ns := setup(ctx)
		bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
		js := trainingJobSet(ns, "train", time.Hour)
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			wls := workloadsOf(ctx, g, js)
			g.Expect(wls).To(HaveLen(1))
			expectHandedOff(ctx, g, ns, jobs.SchedulingGroupName(wls[0].Name), jobSetPods(ctx, g, js), 3)
		}, timeout, interval).Should(Succeed())
		By("deleting the JobSet, whose quota the LeaderWorkerSet needs")
		Expect(env.Client.Delete(ctx, js, bg)).To(Succeed())
		Expect(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())

		set := servingSet(ns, "serve", 1)
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		Eventually(func(g Gomega) {
			expectHandedOff(ctx, g, ns, jobs.SchedulingGroupName("lws", set.Name, "0"), replicaPods(ctx, g, set, "0"), 2)
		}, timeout, interval).Should(Succeed())
	})
})
