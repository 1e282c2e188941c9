package provisioning_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/test/jobsuite"
)

// reserved is the taint of a rack kept for the teams that tolerate it.
var reserved = corev1.Taint{Key: "example.com/reserved", Value: "true", Effect: corev1.TaintEffectNoSchedule}

var _ = Describe("racks whose nodes and node group are tainted", func() {
	// Rack r1 has one free 8-GPU node and a pool of up to two more, all
	// tainted; rack r2 only an untainted pool of two. Among equals r1 sorts
	// first, and it needs fewer new nodes: it is where a gang that may use
	// it goes.
	taintedRacks := func(ctx SpecContext) string {
		ns := rackSetup(ctx, nil, nil)
		addNode(ctx, ns+"-r1-n0", rackLabels(ns, "r1"), reserved)
		addPoolWith(ctx, ns, "r1", 2, nil, []corev1.Taint{reserved})
		addPool(ctx, ns, "r2", 2, nil)
		return ns
	}

	It("(t1) books the untainted rack at once for a gang that does not tolerate the taint", func(ctx SpecContext) {
		ns := taintedRacks(ctx)
		job := gang(ctx, ns, "train", 2*time.Second)

		By("the first request is pinned to r2")
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			g.Expect(wl.Status.Provisioning).NotTo(BeNil())
			g.Expect(wl.Status.Provisioning.Attempt).To(Equal(int32(1)))
			pr := request(ctx, g, job)
			tmpl := &corev1.PodTemplate{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.PodSets[0].PodTemplateRef.Name}, tmpl)).To(Succeed())
			g.Expect(tmpl.Template.Spec.NodeSelector).To(HaveKeyWithValue(rackLabel, "r2"))
		}, timeout, interval).Should(Succeed())
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r2"}))

		By("no booking failed: the tainted rack was never asked for")
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			g.Expect(wl.Status.Provisioning.Attempt).To(Equal(int32(1)))
			g.Expect(wl.Status.Provisioning.FailedDomains).To(BeEmpty())
			g.Expect(jobsuite.EventReasons(ctx, env.Client, ns, wl.Name)(g)).NotTo(ContainElement(HavePrefix("ProvisioningFailed")))
		}, timeout, interval).Should(Succeed())
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(0), "no node is added where the pods cannot run")
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("(t2) lets a gang that tolerates the taint use the tainted rack, its node and its pool", func(ctx SpecContext) {
		ns := taintedRacks(ctx)
		job := gangJob(ns, "reserved", 2, 2*time.Second)
		job.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: reserved.Key, Operator: corev1.TolerationOpEqual,
			Value: reserved.Value, Effect: reserved.Effect}}
		Expect(env.Client.Create(ctx, job)).To(Succeed())

		By("the request is pinned to r1, which needs one new node, and carries the toleration")
		Eventually(func(g Gomega) {
			pr := request(ctx, g, job)
			tmpl := &corev1.PodTemplate{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.PodSets[0].PodTemplateRef.Name}, tmpl)).To(Succeed())
			g.Expect(tmpl.Template.Spec.NodeSelector).To(HaveKeyWithValue(rackLabel, "r1"))
			g.Expect(tmpl.Template.Spec.Tolerations).To(ContainElement(job.Spec.Template.Spec.Tolerations[0]))
		}, timeout, interval).Should(Succeed())
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r1"}))
		Expect(poolNodes(ctx, ns+"-r2")(Default)).To(Equal(0))
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})
})
