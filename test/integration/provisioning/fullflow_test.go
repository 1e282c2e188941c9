package provisioning_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/test/builders"
)

var _ = Describe("the whole flow with the admission engine", func() {
	BeforeEach(func(ctx SpecContext) { installAPI(ctx) })

	It("books a rack-bound Job's rack, moves to the other rack after a stockout, and starts it there", func(ctx SpecContext) {
		tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 3, BackoffSeconds: 1, CapacityNotFoundSeconds: 30})
		cq := builders.ClusterQueue("open-"+tc.id).Quota(tc.flavor.Name, gpu, "16", "").Obj()
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(tc.ns, "open", cq.Name))).To(Succeed())
		tc.pool(ctx, "r1", 1, map[string]string{autoscaler.StockoutAnnotation: "true"})
		tc.pool(ctx, "r2", 1, nil)

		job := builders.Job(tc.ns, "train", "open").Pods(1).Request(gpu, "8").Obj()
		job.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel}
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		wl := &berthv1.Workload{}
		Eventually(func(g Gomega) {
			wls := &berthv1.WorkloadList{}
			g.Expect(env.Client.List(ctx, wls, client.InNamespace(tc.ns))).To(Succeed())
			g.Expect(wls.Items).To(HaveLen(1))
			*wl = wls.Items[0]
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

		By("the first attempt, pinned to r1 (the first of two equal racks), finds no capacity there")
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Provisioning).NotTo(BeNil())
			g.Expect(got.Status.Provisioning.Topology).To(Equal(tc.rack("r1")))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		expectNotFoundNoted(ctx, wl)

		By("after capacityNotFoundSeconds the attempt fails in r1")
		step(ctx, wl, 31*time.Second)
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Provisioning.FailedDomains).To(ContainElement(*tc.rack("r1")))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

		By("after the backoff the next attempt books r2; the stand-in creates its node")
		step(ctx, wl, 2*time.Second)
		var p *berthv1.ProvisioningStatus
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			p = got.Status.Provisioning
			g.Expect(p.Attempt).To(BeNumerically(">=", 2))
			g.Expect(p.Topology).To(Equal(tc.rack("r2")))
			g.Expect(p.State).To(Equal(berthv1.ProvisioningProvisioned))
			g.Expect(condition(got, berthv1.ConditionAdmitted).Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		tmpl := &corev1.PodTemplate{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: p.RequestName + "-main"}, tmpl)).To(Succeed())
		Expect(tmpl.Template.Spec.NodeSelector).To(HaveKeyWithValue(rackLabel, "r2"))
		nodes := &corev1.NodeList{}
		Expect(env.Client.List(ctx, nodes, client.MatchingLabels{caseLabel: tc.id})).To(Succeed())
		Expect(nodes.Items).To(HaveLen(1))
		Expect(nodes.Items[0].Labels).To(HaveKeyWithValue(rackLabel, "r2"))

		By("the Job starts pinned to r2, consuming the booking")
		expectJob(ctx, job, func(g Gomega, j *batchv1.Job) {
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			g.Expect(j.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue(rackLabel, "r2"))
			g.Expect(j.Spec.Template.Annotations).To(HaveKeyWithValue(autoscalingv1.ProvisioningRequestPodAnnotationKey, p.RequestName))
			g.Expect(j.Spec.Template.Annotations).To(HaveKeyWithValue(autoscalingv1.ProvisioningClassPodAnnotationKey, scaleUp))
		})
	})
})
