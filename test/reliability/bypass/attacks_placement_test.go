package bypass_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// berth releases a gang's gated pods with the admission's node selector
// and tolerations added; a pod's own may not take it elsewhere.
var _ = Describe("a tenant with the edit role whose pods say where they run", func() {
	It("gets no member of a pod group released onto another flavor's nodes or another queue's headroom", func(ctx SpecContext) {
		ns := newTeam(ctx, "3")
		mallory := editor(ctx, ns)
		group := members(ns, "placed", "3", "1", 0, 3)
		group[1].Spec.NodeSelector = map[string]string{productLabel: "another-product"}
		group[2].Spec.Tolerations = []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual,
			Value: "serving", Effect: corev1.TaintEffectNoSchedule}}
		// The Workload's template is the first member's (by name): the
		// others differ only in where they would run.
		for _, p := range group[1:] {
			p.Labels["held"] = "true"
		}
		for _, p := range group {
			Expect(mallory.Create(ctx, p)).To(Succeed())
		}
		bound(ctx, group[0])
		// The Workload's PodsHeld condition names each held pod with why,
		// and each held pod carries its own PodHeld warning.
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(workloadOf(ctx, g, ns, string(group[0].UID)).Status.Conditions, berthv1.ConditionPodsHeld)
			g.Expect(c).NotTo(BeNil())
			return c.Message
		}, timeout, interval).Should(And(
			ContainSubstring(group[1].Name+" (its node selector sets "+productLabel+"=another-product"),
			ContainSubstring(group[2].Name+" (the pods tolerate the taint berth.dev/headroom=serving")))
		for p, why := range map[string]string{group[1].Name: "its node selector sets " + productLabel + "=another-product",
			group[2].Name: "the pods tolerate the taint berth.dev/headroom=serving"} {
			Eventually(func(g Gomega) []string { return events(ctx, g, ns, p) }, timeout, interval).
				Should(ContainElement(And(HavePrefix("PodHeld: pod "+p), ContainSubstring(why))), p)
		}
		neverBound(ctx, ns, map[string]string{"held": "true"})
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("cannot hide its pods' tolerations from berth behind a scheduling record of its own", func(ctx SpecContext) {
		ns := newTeam(ctx, "1")
		mallory := editor(ctx, ns)
		pod := members(ns, "recorded", "1", "1", 0, 1)[0]
		pod.Annotations[berthv1.OriginalSchedulingAnnotation] = `[{"name":"main"}]`
		pod.Spec.Tolerations = []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpExists}}
		Expect(mallory.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, ns, string(pod.UID))
			g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", berthv1.ConditionQuotaReserved),
				HaveField("Reason", string(berthv1.ReasonHeadroomNotAllowed)), HaveField("Message", ContainSubstring("whatever its value")))))
		}, timeout, interval).Should(Succeed())
		neverBound(ctx, ns, map[string]string{berthv1.PodGroupLabel: "recorded"})
	})
})
