package deletion_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Expected when a user deletes a Workload: berth's finalizer keeps a
// Workload that holds quota until no pod of its gang runs — deleting it
// never stops a running gang, nor hands its GPUs out while they are used.
// A Workload that holds no quota goes at once, and the job's controller
// queues the job again with a new one.
var _ = Describe("deleting a Workload", func() {
	DescribeTable("of a running gang keeps the gang and its quota until the gang is deleted and its pods are gone",
		func(ctx SpecContext, k kind) {
			s := newSpace(ctx, false)
			gg := k.create(ctx, s.ns, "victim", "")
			wl := s.running(ctx, k, gg)
			next := s.next(ctx, "next")

			Expect(env.Client.Delete(ctx, wl)).To(Succeed())
			s.quotaHeld(ctx, wl, next)
			Consistently(func(g Gomega) {
				g.Expect(s.gangPods(ctx, g, gg)).To(HaveLen(k.pods), "deleting the Workload does not stop the gang")
			}, held/2, interval).Should(Succeed())

			s.holdPods(ctx, gg)
			gg.delete(ctx, metav1.DeletePropagationBackground)
			s.quotaHeld(ctx, wl, next)
			s.releaseAll(ctx)
			s.workloadGone(ctx, wl)
			s.completes(ctx, next)
			s.settled(ctx)
		},
		Entry("Job", jobKind), Entry("JobSet", jobSetKind), Entry("LeaderWorkerSet", lwsKind), Entry("pod group", podGroupKind),
	)

	It("of a waiting job goes at once; the job is queued again with a new Workload and runs once", func(ctx SpecContext) {
		s := newSpace(ctx, false)
		blocker := s.runningJob(ctx, "blocker")
		job := s.next(ctx, "job")
		gg := gang{obj: job, members: []client.Object{job}, labels: map[string]string{batchv1.JobNameLabel: job.Name}}
		old := s.waiting(ctx, gg)

		Expect(env.Client.Delete(ctx, old)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := s.workload(ctx, g, gg)
			g.Expect(wl.UID).NotTo(Equal(old.UID), "a new Workload replaces the deleted one")
		}, timeout, interval).Should(Succeed())
		s.waits(ctx, job, "the blocker still holds the quota")

		Expect(env.Client.Delete(ctx, blocker, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		s.completes(ctx, job)
		s.settled(ctx)
	})

	It("of a gang being evicted keeps its quota until its pods are gone; the job is queued again and runs after the preemptor", func(ctx SpecContext) {
		s := newSpace(ctx, true)
		gg := jobKind.create(ctx, s.ns, "low", s.ns+"-low")
		old := s.running(ctx, jobKind, gg)
		s.holdPods(ctx, gg)
		high := s.preempt(ctx, old)

		Expect(env.Client.Delete(ctx, old)).To(Succeed())
		s.quotaHeld(ctx, old, high)
		s.releaseAll(ctx)
		s.workloadGone(ctx, old)
		s.completes(ctx, high)
		again := s.running(ctx, jobKind, gg)
		Expect(again.UID).NotTo(Equal(old.UID), "admitted again on a new Workload")
		s.settled(ctx)
	})
})
