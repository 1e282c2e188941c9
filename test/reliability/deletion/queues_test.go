package deletion_test

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
)

// events lists "Type Reason: note" of the events about the named object.
func (s *space) events(ctx context.Context, g Gomega, name string) []string {
	evs := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, evs, client.InNamespace(s.ns))).To(Succeed())
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	return out
}

// told waits until the Workload of job waits with the reason, its message
// says what to fix (fix), and a Warning event with that message was
// recorded on the Workload.
func (s *space) told(ctx context.Context, job *batchv1.Job, reason berthv1.WorkloadReason, fix string) {
	Eventually(func(g Gomega) {
		wl := s.workloadOf(ctx, g, string(job.UID))
		c := lifecycle.Condition(wl, berthv1.ConditionQuotaReserved)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(string(reason)))
		g.Expect(c.Message).To(ContainSubstring(fix))
		g.Expect(s.events(ctx, g, wl.Name)).To(ContainElement(And(HavePrefix("Warning "), ContainSubstring(fix))))
	}, timeout, interval).Should(Succeed())
}

// runningJob submits an 8-GPU Job and waits until it runs.
func (s *space) runningJob(ctx context.Context, name string) *batchv1.Job {
	g := jobKind.create(ctx, s.ns, name, "")
	s.running(ctx, jobKind, g)
	return g.obj.(*batchv1.Job)
}

// keepsRunning checks that a running Job is neither suspended nor loses
// its pod while its queue changes: admitted work is not stopped by a
// queue's deletion or edit.
func (s *space) keepsRunning(ctx context.Context, job *batchv1.Job) {
	Consistently(func(g Gomega) {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		g.Expect(fresh.Spec.Suspend).To(HaveValue(BeFalse()))
		pods := s.jobPods(ctx, g, job)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning))
	}, held, interval).Should(Succeed())
}

func (s *space) clusterQueue(ctx context.Context, g Gomega) *berthv1.ClusterQueue {
	cq := &berthv1.ClusterQueue{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.ns}, cq)).To(Succeed())
	return cq
}

// Expected when a queue or flavor goes or changes under workloads that
// hold quota: admitted jobs keep running on it (stopping them is what
// stopPolicy HoldAndDrain is for), their quota stays counted, waiting
// ones say what to fix, and once it is fixed they are admitted.
var _ = Describe("deleting and editing queues and flavors under workloads", func() {
	DescribeTable("keeps running workloads whose queue or flavor is deleted, tells the waiting ones to create it, and admits them once it is back",
		func(ctx SpecContext, removed func(ns string) client.Object, recreate func(ns string) client.Object, reason berthv1.WorkloadReason, hint string) {
			s := newSpace(ctx, false)
			running := s.runningJob(ctx, "running")
			next := s.next(ctx, "next")
			s.waitingFor(ctx, next)

			gone := removed(s.ns)
			Expect(env.Client.Delete(ctx, gone)).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(gone), gone))
			}, timeout, interval).Should(BeTrue(), "nothing of berth's keeps it from going")
			s.told(ctx, next, reason, hint)
			s.keepsRunning(ctx, running)

			By("re-creating it: the running job's 8 GPUs still count")
			Expect(env.Client.Create(ctx, recreate(s.ns))).To(Succeed())
			s.waits(ctx, next, "the running job still holds the quota")
			s.runsAfter(ctx, running, next)
		},
		Entry("a LocalQueue",
			func(ns string) client.Object {
				return &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}}
			},
			func(ns string) client.Object { return builders.LocalQueue(ns, "team", ns) },
			berthv1.ReasonLocalQueueNotFound, "create it"),
		Entry("a ClusterQueue",
			func(ns string) client.Object { return &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}} },
			func(ns string) client.Object { return builders.ClusterQueue(ns).Quota(ns, builders.GPU, "8", "").Obj() },
			berthv1.ReasonClusterQueueNotFound, "create it"),
		Entry("a ResourceFlavor (its quota is the ClusterQueue's)",
			func(ns string) client.Object { return &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: ns}} },
			func(ns string) client.Object { return builders.Flavor(ns, map[string]string{productLabel: product}) },
			berthv1.ReasonFlavorsNotFound, "create them"),
	)

	It("admits nothing over a lowered quota while running workloads use more, and admits what fits once they end", func(ctx SpecContext) {
		s := newSpace(ctx, false)
		running := s.runningJob(ctx, "running")
		small := builders.Job(s.ns, "small", "team").Request(builders.GPU, "4").PodAnnotations(controlplane.RunFor(time.Second)).Obj()
		Expect(env.Client.Create(ctx, small)).To(Succeed())
		s.waitingFor(ctx, small)

		Eventually(func(g Gomega) {
			cq := s.clusterQueue(ctx, g)
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.Set(4)
			g.Expect(env.Client.Update(ctx, cq)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		s.keepsRunning(ctx, running)
		s.waits(ctx, small, "8 GPUs in use, over the 4 of the quota")
		s.runsAfter(ctx, running, small)
	})

	It("starts jobs admitted after a flavor's node labels changed on the new labels, and leaves running ones alone", func(ctx SpecContext) {
		s := newSpace(ctx, false)
		running := s.runningJob(ctx, "running")
		next := s.next(ctx, "next")
		s.waitingFor(ctx, next)

		Eventually(func(g Gomega) {
			rf := &berthv1.ResourceFlavor{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.ns}, rf)).To(Succeed())
			rf.Spec.NodeLabels = map[string]string{controlplane.LabelGPUFamily: "hopper"}
			g.Expect(env.Client.Update(ctx, rf)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		s.keepsRunning(ctx, running)
		s.waits(ctx, next, "the running job still holds the quota")

		Expect(env.Client.Delete(ctx, running, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		s.completes(ctx, next)
		Eventually(func(g Gomega) {
			pods := s.jobPods(ctx, g, next)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Spec.NodeSelector).To(HaveKeyWithValue(controlplane.LabelGPUFamily, "hopper"))
			g.Expect(pods[0].Spec.NodeSelector).NotTo(HaveKey(productLabel), "the old labels are not used")
		}, timeout, interval).Should(Succeed())
		s.settled(ctx)
	})
})

// runsAfter deletes the running Job and checks that next then runs to
// completion, and that the space settles.
func (s *space) runsAfter(ctx context.Context, running, next *batchv1.Job) {
	Expect(env.Client.Delete(ctx, running, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	s.completes(ctx, next)
	s.settled(ctx)
}

// waitingFor waits until a Job's Workload waits for quota.
func (s *space) waitingFor(ctx context.Context, job *batchv1.Job) {
	s.waiting(ctx, gang{obj: job, members: []client.Object{job}})
}

// Expected when a namespace with queued and running workloads is deleted:
// it goes (no finalizer of berth's keeps it), and the quota its workloads
// held is released once their pods are gone, for other namespaces' jobs.
var _ = Describe("deleting a namespace", func() {
	It("goes with its running and waiting gangs of every kind, and releases their quota", func(ctx SpecContext) {
		s := newSpace(ctx, false)
		runningJob := s.runningJob(ctx, "running")
		for _, k := range kinds {
			s.waiting(ctx, k.create(ctx, s.ns, "w-"+strings.ReplaceAll(strings.ToLower(k.name), " ", ""), ""))
		}
		s.holdPods(ctx, gang{labels: map[string]string{batchv1.JobNameLabel: runningJob.Name}})

		By("deleting the namespace while a pod still terminates")
		other := newSpace(ctx, false)
		Expect(env.Client.Delete(ctx, &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: other.ns, Name: "team"}})).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(other.ns, "team", s.ns))).To(Succeed())
		next := other.next(ctx, "next")
		Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})).To(Succeed())
		Consistently(func(g Gomega) {
			job := &batchv1.Job{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(next), job)).To(Succeed())
			g.Expect(job.Spec.Suspend).To(HaveValue(BeTrue()), "the terminating pod still uses the GPUs")
		}, held, interval).Should(Succeed())
		s.releaseAll(ctx)
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: s.ns}, &corev1.Namespace{}))
		}, timeout, interval).Should(BeTrue(), "the namespace goes")
		other.completes(ctx, next)
		Eventually(func(g Gomega) {
			cq := s.clusterQueue(ctx, g)
			g.Expect(cq.Status.AdmittedWorkloads).To(BeZero())
			g.Expect(cq.Status.PendingWorkloads).To(BeZero(), "the deleted namespace's waiting gangs left the queue")
			g.Expect(usedGPUs(cq)).To(BeZero())
		}, timeout, interval).Should(Succeed())
	})
})
