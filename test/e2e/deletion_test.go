package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
)

// The Workload finalizer keeps a job's quota until its pods are gone,
// however the job goes.
var _ = Describe("quota of jobs that go away", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.Flavor(ns, map[string]string{productLabel: product}))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, "8", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
	})

	// runningJob submits an 8-GPU Job whose pod runs for runFor, and waits
	// until the pod runs; it returns the Job and its Workload.
	runningJob := func(ctx SpecContext, name string, runFor time.Duration) (*batchv1.Job, *berthv1.Workload) {
		job := builders.Job(ns, name, "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(runFor)).Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, job)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning))
		}, timeout, interval).Should(Succeed())
		var wl *berthv1.Workload
		Eventually(func(g Gomega) { wl = workloadOf(ctx, g, job) }, timeout, interval).Should(Succeed())
		Expect(wl.Finalizers).To(ContainElement(berthv1.WorkloadFinalizer))
		return job, wl
	}

	// held checks that next stays suspended while the pods of job run.
	held := func(ctx SpecContext, job, next *batchv1.Job) {
		Consistently(func(g Gomega) {
			g.Expect(getJob(ctx, g, next).Spec.Suspend).To(HaveValue(BeTrue()), "the next job waits for the GPUs")
			pods := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning), "the first job's pod still runs")
		}, "3s", interval).Should(Succeed())
	}

	It("releases the quota of a Job deleted with orphan propagation only once its pods are gone", func(ctx SpecContext) {
		job, wl := runningJob(ctx, "orphaned", 15*time.Second)
		next := builders.Job(ns, "next", "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(time.Second)).Obj()
		Expect(env.Client.Create(ctx, next)).To(Succeed())

		By("deleting the Job but not its pods")
		Expect(env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}))
		}, timeout, interval).Should(BeTrue())
		Eventually(func(g Gomega) {
			got := &berthv1.Workload{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), got)).To(Succeed())
			g.Expect(got.OwnerReferences).To(BeEmpty(), "orphaned")
			g.Expect(got.Status.Admission).NotTo(BeNil(), "still holding the quota")
		}, timeout, interval).Should(Succeed())
		held(ctx, job, next)

		By("once the orphaned pod ends, its Workload goes and the next job runs")
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), &berthv1.Workload{}))
		}, timeout, interval).Should(BeTrue())
		Eventually(complete(ctx, next), timeout, interval).Should(Succeed())
	})

	It("keeps a running Job and its quota when its Workload is deleted, and lets the Workload go once the Job finished", func(ctx SpecContext) {
		job, wl := runningJob(ctx, "kept", 8*time.Second)
		next := builders.Job(ns, "next", "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(time.Second)).Obj()
		Expect(env.Client.Create(ctx, next)).To(Succeed())

		Expect(env.Client.Delete(ctx, wl)).To(Succeed())
		held(ctx, job, next)
		Expect(getJob(ctx, Default, job).Spec.Suspend).To(HaveValue(BeFalse()), "the running job is not stopped")

		Eventually(complete(ctx, job), timeout, interval).Should(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), &berthv1.Workload{}))
		}, timeout, interval).Should(BeTrue())
		Eventually(complete(ctx, next), timeout, interval).Should(Succeed())
	})
})
