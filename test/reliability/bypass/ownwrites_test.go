package bypass_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// validateJob is the path of berth's Job webhook (vjob.berth.dev).
const validateJob = "/validate-batch-v1-job"

var _ = Describe("berth's own writes of a queued job", func() {
	It("make no call to the job's webhook, while an editor's edits of the job still reach it", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		before := webhookCalls(Default)[validateJob]
		job := gpuJob(ns, "own-writes")
		Expect(mallory.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Spec.Suspend).To(HaveValue(BeFalse()))
		}, timeout, interval).Should(Succeed(), "berth admits the job")
		Expect(webhookCalls(Default)[validateJob]-before).To(Equal(1.0), "the editor's create is checked; berth's release of the job is not sent to the webhook")

		By("the editor's removal of the queue label still reaches the webhook, which refuses it")
		Expect(update(ctx, mallory, job, func(j *batchv1.Job) { delete(j.Labels, berthv1.QueueNameLabel) })).To(
			MatchError(ContainSubstring("cannot be removed while berth holds workload")))
		Expect(webhookCalls(Default)[validateJob]-before).To(BeNumerically(">=", 2), "the refusal came from the webhook")
		expectNoPodOutsideQuota(ctx, ns)
	})
})
