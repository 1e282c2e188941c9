package bypass_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/test/framework"
)

// The paths of berth's pod webhooks (mpod.berth.dev, vpod.berth.dev).
const (
	mutatePod   = framework.MutatePodPath
	validatePod = "/validate--v1-pod"
)

// webhookCalls is how many requests berth's webhook server answered, by
// path.
func webhookCalls(g Gomega) map[string]float64 {
	calls, err := framework.WebhookCalls()
	g.Expect(err).NotTo(HaveOccurred())
	return calls
}

// podGate is the path berth reports.
func podGate() string {
	m := env.Berth().Metrics
	for _, path := range []string{metrics.PodGatePolicy, metrics.PodGateWebhook} {
		if testutil.ToFloat64(m.PodGate.WithLabelValues(path)) == 1 {
			return path
		}
	}
	return ""
}

// isGated reports whether the pod carries berth's gate.
func isGated(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == berthv1.AdmissionGate {
			return true
		}
	}
	return false
}

var _ = Describe("the pod gate inside the API server", Ordered, func() {
	It("gates an editor's queued pods without calling berth, and berth's release calls nothing either", func(ctx SpecContext) {
		Eventually(podGate, timeout, interval).Should(Equal(metrics.PodGatePolicy))
		// Room for the group of two and the pod that keeps a gate of its
		// own: admitted first (its Workload may sort first), that pod holds
		// its GPU while it never starts, and a quota of 2 would leave the
		// group waiting.
		ns := newTeam(ctx, "3")
		mallory := editor(ctx, ns)
		// berth reports the policy path once the binding exists; the API
		// server runs the policy a moment later. Run first, the spec
		// would otherwise count the webhook's calls for pods created in
		// between.
		Expect(framework.WaitForPodGatePolicy(ctx, env.Client, ns)).To(Succeed())
		before := webhookCalls(Default)
		group := members(ns, "quiet", "2", "1", 0, 2)
		for _, p := range group {
			Expect(mallory.Create(ctx, p)).To(Succeed())
			Expect(isGated(p)).To(BeTrue(), "pod %s is created gated", p.Name)
		}
		// The policy's apply configuration merges its gate into those a
		// pod arrives with (schedulingGates is a list keyed by name).
		other := members(ns, "other-gate", "1", "1", 0, 1)[0]
		other.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
		Expect(mallory.Create(ctx, other)).To(Succeed())
		Expect(other.Spec.SchedulingGates).To(ConsistOf(corev1.PodSchedulingGate{Name: "example.com/hold"},
			corev1.PodSchedulingGate{Name: berthv1.AdmissionGate}), "pod %s keeps its own gate and gets berth's", other.Name)
		bound(ctx, group...)
		after := webhookCalls(Default)
		Expect(after[mutatePod]).To(Equal(before[mutatePod]), "creating queued pods never called the pod gate webhook")
		Expect(after[validatePod]).To(Equal(before[validatePod]), "neither the creates nor berth's release called the pod validation webhook")

		By("a change the webhook must judge still reaches it: removing the gate of a pod berth holds")
		held := members(ns, "held", "4", "1", 0, 1)[0]
		Expect(mallory.Create(ctx, held)).To(Succeed())
		Expect(update(ctx, mallory, held, func(p *corev1.Pod) { p.Spec.SchedulingGates = nil })).
			To(MatchError(ContainSubstring("the berth.dev/admission gate is removed by berth when the pod's gang is admitted")))
		Expect(webhookCalls(Default)[validatePod]).To(BeNumerically(">", after[validatePod]))

		By("a change that needs no state of berth's is refused inside the API server, with the webhook's message")
		calls := webhookCalls(Default)
		Expect(update(ctx, mallory, held, func(p *corev1.Pod) { p.Labels[berthv1.PodGroupLabel] = "other" })).To(MatchError(And(
			ContainSubstring("ValidatingAdmissionPolicy 'berth-pod-checks'"),
			ContainSubstring(`metadata.labels[berth.dev/pod-group]: Forbidden: cannot be changed or removed on a queued pod`))))
		Expect(webhookCalls(Default)[validatePod]).To(Equal(calls[validatePod]), "the refusal did not call berth")
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("falls back to berth's webhook when the policy is deleted, and no queued pod is created ungated meanwhile", func(ctx SpecContext) {
		ns := newTeam(ctx, "64")
		mallory := editor(ctx, ns)
		Expect(framework.DeletePodGatePolicy(ctx, env.Client)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(framework.InstallPodGatePolicy(ctx, env.Client)).To(Succeed())
			Eventually(podGate, timeout, interval).Should(Equal(metrics.PodGatePolicy))
		})
		Eventually(podGate, timeout, interval).Should(Equal(metrics.PodGateWebhook))

		By("creating pods until the API server no longer runs the policy: every one is gated, the last by the webhook")
		var created []*corev1.Pod
		Eventually(func(g Gomega) {
			before := webhookCalls(g)
			p := members(ns, "fallback-"+rand.String(5), "1", "1", 0, 1)[0]
			g.Expect(mallory.Create(ctx, p)).To(Succeed())
			created = append(created, p)
			Expect(isGated(p)).To(BeTrue(), "pod %s is created gated", p.Name)
			g.Expect(webhookCalls(g)[mutatePod]).To(BeNumerically(">", before[mutatePod]))
		}, timeout, interval).Should(Succeed())
		bound(ctx, created...)
		expectNoPodOutsideQuota(ctx, ns)
	})
})
