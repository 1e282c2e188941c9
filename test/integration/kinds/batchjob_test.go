package kinds_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// workload returns the job's only Workload.
func workload(ctx context.Context, job client.Object) func(Gomega) *berthv1.Workload {
	return func(g Gomega) *berthv1.Workload {
		wls, err := jobsuite.WorkloadsOf(ctx, env.Client, job)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(wls).To(HaveLen(1))
		return &wls[0]
	}
}

func admitted(ctx context.Context, job client.Object) func(Gomega) bool {
	return func(g Gomega) bool {
		wl := workload(ctx, job)(g)
		return meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted) &&
			!meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionEvicted)
	}
}

func running(ctx context.Context, job *batchv1.Job) func(Gomega) bool {
	return func(g Gomega) bool {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		return !ptr.Deref(fresh.Spec.Suspend, false)
	}
}

func setParallelism(ctx context.Context, job *batchv1.Job, n int32) {
	Eventually(func(g Gomega) {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		fresh.Spec.Parallelism = ptr.To(n)
		g.Expect(env.Client.Update(ctx, fresh)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func podSetCount(ctx context.Context, job client.Object) func(Gomega) int32 {
	return func(g Gomega) int32 { return workload(ctx, job)(g).Spec.PodSets[0].Count }
}

var _ = Describe("batch Job specifics", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("admits an Indexed Job as one gang of all its parallel pods", func(ctx SpecContext) {
		job := builders.Job(ns, "indexed", "team").Pods(4).Request(builders.GPU, "2").Obj()
		job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(running(ctx, job), timeout, interval).Should(BeTrue())
		Expect(podSetCount(ctx, job)(Default)).To(BeEquivalentTo(4))
	})

	It("releases the quota of pods a running Job no longer runs when its parallelism drops", func(ctx SpecContext) {
		big := builders.Job(ns, "big", "team").Request(builders.GPU, "4").Obj()
		big.Spec.Parallelism, big.Spec.Completions = ptr.To[int32](2), ptr.To[int32](4)
		Expect(env.Client.Create(ctx, big)).To(Succeed())
		Eventually(running(ctx, big), timeout, interval).Should(BeTrue())
		other := builders.Job(ns, "other", "team").Request(builders.GPU, "4").Obj()
		Expect(env.Client.Create(ctx, other)).To(Succeed())
		Consistently(running(ctx, other), "2s", interval).Should(BeFalse())

		setParallelism(ctx, big, 1)
		Eventually(podSetCount(ctx, big), timeout, interval).Should(BeEquivalentTo(1))
		Eventually(running(ctx, other), timeout, interval).Should(BeTrue())
		Expect(running(ctx, big)(Default)).To(BeTrue(), "a Job that shrinks keeps running")
	})

	It("queues a running Job that grows again whole, and starts it once all its pods are admitted", func(ctx SpecContext) {
		job := builders.Job(ns, "grows", "team").Request(builders.GPU, "4").Obj()
		job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](1), ptr.To[int32](4)
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(running(ctx, job), timeout, interval).Should(BeTrue())

		setParallelism(ctx, job, 2)
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, job.Name), timeout, interval).Should(ContainElement(ContainSubstring("Resized")))
		Eventually(podSetCount(ctx, job), timeout, interval).Should(BeEquivalentTo(2))
		Eventually(admitted(ctx, job), timeout, interval).Should(BeTrue())
		Eventually(running(ctx, job), timeout, interval).Should(BeTrue())
	})

	It("orders by the berth.dev/priority-class label, else the pods' PriorityClass, and reports a missing one", func(ctx SpecContext) {
		for name, v := range map[string]int32{ns + "-high": 1000, ns + "-low": 10} {
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}
			Expect(env.Client.Create(ctx, pc)).To(Succeed())
		}
		labelled := builders.Job(ns, "labelled", "team").Obj()
		labelled.Labels[berthv1.PriorityClassLabel] = ns + "-high"
		labelled.Spec.Template.Spec.PriorityClassName = ns + "-low"
		fromPods := builders.Job(ns, "from-pods", "team").Obj()
		fromPods.Spec.Template.Spec.PriorityClassName = ns + "-low"
		missing := builders.Job(ns, "missing", "team").Obj()
		missing.Labels[berthv1.PriorityClassLabel] = "no-such-class"
		for _, j := range []*batchv1.Job{labelled, fromPods, missing} {
			Expect(env.Client.Create(ctx, j)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			wl := workload(ctx, labelled)(g)
			g.Expect(wl.Spec.Priority).To(BeEquivalentTo(1000))
			g.Expect(wl.Spec.PriorityClassName).To(Equal(ns + "-high"))
			g.Expect(workload(ctx, fromPods)(g).Spec.Priority).To(BeEquivalentTo(10))
		}, timeout, interval).Should(Succeed())
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, missing.Name), timeout, interval).Should(ContainElement(And(
			ContainSubstring("InvalidJob"), ContainSubstring(`PriorityClass "no-such-class" does not exist`))))
	})

	It("counts GPUs claimed through a ResourceClaimTemplate against quota", func(ctx SpecContext) {
		tmpl := &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "four-gpus"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: gpuClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 4,
				}}},
			}}},
		}
		Expect(env.Client.Create(ctx, tmpl)).To(Succeed())
		withClaim := func(name, template string) *batchv1.Job {
			j := builders.Job(ns, name, "team").Pods(2).Obj()
			j.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}}
			j.Spec.Template.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
			return j
		}
		first, second := withClaim("first", tmpl.Name), withClaim("second", tmpl.Name)
		Expect(env.Client.Create(ctx, first)).To(Succeed())
		Eventually(running(ctx, first), timeout, interval).Should(BeTrue())
		gpus := workload(ctx, first)(Default).Spec.PodSets[0].Requests[builders.GPU]
		Expect(gpus.String()).To(Equal("4"), "each pod claims 4 devices of the mapped class")
		Expect(env.Client.Create(ctx, second)).To(Succeed())
		Consistently(running(ctx, second), "2s", interval).Should(BeFalse())

		missing := withClaim("missing", "no-such-template")
		Expect(env.Client.Create(ctx, missing)).To(Succeed())
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, missing.Name), timeout, interval).Should(ContainElement(And(
			ContainSubstring("InvalidJob"), ContainSubstring(`ResourceClaimTemplate "no-such-template" does not exist`))))
	})
})
