package bypass_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
)

// gpuClass is the DeviceClass the suite's berth counts as one GPU per
// device (suite_test.go).
const gpuClass = "gpu.bypass.example.com"

// claimTemplate is a ResourceClaimTemplate of n devices of gpuClass.
func claimTemplate(ns, name string, n int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: gpuClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n,
			}}},
		}}},
	}
}

// claimingJob is a Job of one pod whose GPUs come only from the
// ResourceClaimTemplate template.
func claimingJob(ns, name, template string) *batchv1.Job {
	job := builders.Job(ns, name, queue).Obj()
	job.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}}
	job.Spec.Template.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	return job
}

// admittedGPUs reports the GPUs the Workload of the object of uid is
// charged while it is admitted (its pod sets' counts times their per-pod
// requests), and whether it is admitted at all.
func admittedGPUs(ctx context.Context, g Gomega, ns, uid string) (int64, bool) {
	wl := workloadOf(ctx, g, ns, uid)
	if !lifecycle.MayRun(lifecycle.PhaseOf(wl)) || wl.Status.Admission == nil {
		return 0, false
	}
	var total int64
	for _, ps := range wl.Spec.PodSets {
		q := ps.Requests[builders.GPU]
		total += int64(ps.Count) * q.Value()
	}
	return total, true
}

var _ = Describe("a tenant with the edit role and DRA claims", func() {
	It("cannot run a queued job on a larger ResourceClaimTemplate than it was queued with", func(ctx SpecContext) {
		ns := newTeam(ctx, "2")
		mallory := editor(ctx, ns)

		By("filling the queue's 2 GPUs, so that the claiming job waits")
		filler := builders.Job(ns, "filler", queue).Request(builders.GPU, "2").Obj()
		Expect(mallory.Create(ctx, filler)).To(Succeed())
		Eventually(func(g Gomega) bool {
			_, ok := admittedGPUs(ctx, g, ns, string(filler.UID))
			return ok
		}, timeout, interval).Should(BeTrue())

		By("queueing a job that claims one device through a template")
		Expect(mallory.Create(ctx, claimTemplate(ns, "claims", 1))).To(Succeed())
		swap := claimingJob(ns, "swap", "claims")
		Expect(mallory.Create(ctx, swap)).To(Succeed())
		Eventually(func(g Gomega) []berthv1.PodSet {
			return workloadOf(ctx, g, ns, string(swap.UID)).Spec.PodSets
		}, timeout, interval).Should(ConsistOf(HaveField("Requests", HaveKeyWithValue(builders.GPU, resource.MustParse("1")))))

		By("swapping the template for one of two devices under the same name while the job waits")
		Expect(mallory.Delete(ctx, claimTemplate(ns, "claims", 1))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "claims"}, &resourcev1.ResourceClaimTemplate{}))
		}, timeout, interval).Should(BeTrue())
		Expect(mallory.Create(ctx, claimTemplate(ns, "claims", 2))).To(Succeed())

		By("a one-GPU job queued behind it, which must not be admitted beside the swapped job")
		bystander := builders.Job(ns, "bystander", queue).Request(builders.GPU, "1").Obj()
		Expect(mallory.Create(ctx, bystander)).To(Succeed())

		By("ending the filler: the swapped job is admitted only at its new cost of two GPUs")
		Expect(mallory.Delete(ctx, filler, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) int64 {
			gpus, ok := admittedGPUs(ctx, g, ns, string(swap.UID))
			g.Expect(ok).To(BeTrue(), "the swapped job is admitted")
			return gpus
		}, timeout, interval).Should(Equal(int64(2)))
		Consistently(func(g Gomega) bool {
			_, ok := admittedGPUs(ctx, g, ns, string(bystander.UID))
			return ok
		}, quiet, interval).Should(BeFalse(), "the queue's two GPUs are the swapped job's")
		expectNoPodOutsideQuota(ctx, ns)
	})
})

var _ = Describe("a tenant with the edit role who claims devices in an admitted gang", func() {
	It("cannot take a Job's place with a pod whose claim asks for more devices than each pod was admitted with", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		Expect(mallory.Create(ctx, claimTemplate(ns, "one", 1))).To(Succeed())
		Expect(mallory.Create(ctx, claimTemplate(ns, "eight", 8))).To(Succeed())
		job := claimingJob(ns, "claims", "one")
		job.Spec.Template.Annotations = map[string]string{}
		Expect(mallory.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) int64 {
			gpus, ok := admittedGPUs(ctx, g, ns, string(job.UID))
			g.Expect(ok).To(BeTrue())
			return gpus
		}, timeout, interval).Should(Equal(int64(1)))

		By("creating a pod that claims the Job, with the admission's labels and node selector, and the eight-device template")
		var sibling corev1.Pod
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			sibling = pods.Items[0]
		}, timeout, interval).Should(Succeed())
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Labels: sibling.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
			Spec: *sibling.Spec.DeepCopy()}
		forged.Spec.NodeName = ""
		forged.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight")}}
		Expect(mallory.Create(ctx, forged)).To(MatchError(ContainSubstring("the pod requests 8 of nvidia.com/gpu (its containers and DRA claims together)")))
		expectNoPodOutsideQuota(ctx, ns)
	})
})
