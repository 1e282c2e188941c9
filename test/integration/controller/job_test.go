package controller_test

import (
	"context"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/test/builders"
)

var _ = Describe("batch Job admission", func() {
	var ns string
	var cqName string

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		cqName = ns // one ClusterQueue per spec keeps specs independent
		flavor := builders.Flavor(ns+"-h200", map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"})
		flavor.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		Expect(env.Client.Create(ctx, flavor)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(cqName).Quota(flavor.Name, builders.GPU, "8", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", cqName))).To(Succeed())
	})

	It("holds a Job, admits it whole on the flavor's nodes, and releases quota when it is deleted", func(ctx SpecContext) {
		first := builders.Job(ns, "first", "team").Pods(2).Request(builders.GPU, "4").Obj()
		Expect(env.Client.Create(ctx, first)).To(Succeed())
		Expect(first.Spec.Suspend).To(HaveValue(BeTrue()), "the webhook suspends a labelled Job at creation")

		By("admitting it and starting it with the flavor's node labels and tolerations")
		Eventually(func(g Gomega) {
			wl, err := workloadOf(ctx, first)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl.Spec.PodSets).To(HaveLen(1))
			g.Expect(wl.Spec.PodSets[0].Count).To(BeEquivalentTo(2))
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted)).To(BeTrue())
			job := &batchv1.Job{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(first), job)).To(Succeed())
			g.Expect(job.Spec.Suspend).To(HaveValue(BeFalse()))
			g.Expect(job.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-H200"))
			g.Expect(job.Spec.Template.Spec.Tolerations).To(ContainElement(HaveField("Key", "nvidia.com/gpu")))
		}, timeout, interval).Should(Succeed())

		By("holding a second Job that does not fit, saying which resource is short")
		second := builders.Job(ns, "second", "team").Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			wl, err := workloadOf(ctx, second)
			g.Expect(err).NotTo(HaveOccurred())
			c := condition(wl, berthv1.ConditionQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("nvidia.com/gpu"))
		}, timeout, interval).Should(Succeed())
		Consistently(suspended(ctx, second), "2s", interval).Should(BeTrue())

		By("admitting the second Job once the first is deleted")
		Expect(env.Client.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(suspended(ctx, second), timeout, interval).Should(BeFalse())
		Eventually(func(g Gomega) {
			cq := &berthv1.ClusterQueue{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: cqName}, cq)).To(Succeed())
			g.Expect(cq.Status.AdmittedWorkloads).To(BeEquivalentTo(1))
			g.Expect(cq.Status.FlavorsUsage).To(HaveLen(1))
			g.Expect(cq.Status.FlavorsUsage[0].Resources[0].Total.String()).To(Equal("8"))
		}, timeout, interval).Should(Succeed())
	})

	It("keeps a Job for a missing LocalQueue suspended, says so, and runs it once the queue exists", func(ctx SpecContext) {
		job := builders.Job(ns, "orphan", "missing").Request(builders.GPU, "1").Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl, err := workloadOf(ctx, job)
			g.Expect(err).NotTo(HaveOccurred())
			c := condition(wl, berthv1.ConditionQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(string(berthv1.ReasonLocalQueueNotFound)))
			g.Expect(c.Message).To(ContainSubstring(`LocalQueue "missing" does not exist`))
		}, timeout, interval).Should(Succeed())
		Eventually(eventReasons(ctx, ns, job.Name), timeout, interval).Should(ContainElement(ContainSubstring("Unqueueable")))
		Consistently(suspended(ctx, job), "2s", interval).Should(BeTrue())

		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "missing", cqName))).To(Succeed())
		Eventually(suspended(ctx, job), timeout, interval).Should(BeFalse())
	})

	It("rejects a Job that runs no pods with an event, and queues it once fixed", func(ctx SpecContext) {
		job := builders.Job(ns, "empty", "team").Request(builders.GPU, "1").Obj()
		zero := int32(0)
		job.Spec.Parallelism = &zero
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(eventReasons(ctx, ns, job.Name), timeout, interval).Should(ContainElement(ContainSubstring("set parallelism to at least 1")))
		Consistently(func() error { _, err := workloadOf(ctx, job); return err }, "1s", interval).Should(HaveOccurred())
	})
})

var _ = Describe("admission writes", Ordered, func() {
	It("rolls the engine back when an admission cannot be written, and admits exactly once later", func(ctx SpecContext) {
		var failures atomic.Int32
		failures.Store(2)
		berth := admissionHook(func(_ context.Context, write func() error, _ *berthv1.Workload) error {
			if failures.Load() > 0 {
				failures.Add(-1)
				return errInjected
			}
			return write()
		})
		ns := queueSetup(ctx, "8")
		job := builders.Job(ns, "retried", "team").Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())

		Eventually(suspended(ctx, job), timeout, interval).Should(BeFalse())
		Expect(failures.Load()).To(BeZero(), "both injected failures were hit")
		Eventually(func(g Gomega) {
			cq := &berthv1.ClusterQueue{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
			g.Expect(cq.Status.AdmittedWorkloads).To(BeEquivalentTo(1))
			g.Expect(cq.Status.FlavorsUsage[0].Resources[0].Total.String()).To(Equal("8"))
		}, timeout, interval).Should(Succeed())
		Expect(eventReasons(ctx, ns, job.Name)(Default)).To(ContainElement(HavePrefix("Started:")), "the job was started once admitted")
		Expect(testutil.ToFloat64(berth.Metrics.AdmissionsTotal.WithLabelValues(metrics.ResultRolledBack))).To(BeEquivalentTo(2))
		Expect(testutil.ToFloat64(berth.Metrics.AdmissionsTotal.WithLabelValues(metrics.ResultAdmitted))).To(BeEquivalentTo(1))
	})
})

var errInjected = &injectedError{}

type injectedError struct{}

func (*injectedError) Error() string { return "injected: the API server is unavailable" }
