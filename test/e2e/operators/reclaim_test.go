package operators_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

// racks adds, for one spec, n racks of two 8-GPU nodes each, labelled
// with the spec's own product so other specs' flavors stay off them, and a
// flavor of them whose topology levels are rack and hostname.
func racks(ctx context.Context, pool string, n int) {
	for r := range n {
		for i := range 2 {
			name := fmt.Sprintf("%s-r%d-%d", pool, r, i)
			node := controlplane.GPUNode(name, 8, map[string]string{productLabel: pool, rackLabel: fmt.Sprintf("r%d", r)})
			Expect(env.Client.Create(ctx, node)).To(Succeed())
			DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, node)) })
			Expect(controlplane.WaitForNodeReady(ctx, env.Client, name)).To(Succeed())
		}
	}
	rf := builders.Flavor(pool, map[string]string{productLabel: pool})
	rf.Spec.TopologyLevels = []string{rackLabel, corev1.LabelHostname}
	Expect(env.Client.Create(ctx, rf)).To(Succeed())
}

// rackJob is a Job of two 8-GPU pods required in one rack, a whole rack,
// running for an hour (a kwok Job pod otherwise ends within seconds).
func rackJob(ns, name, queue string) *batchv1.Job {
	job := builders.Job(ns, name, queue).Pods(2).Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(time.Hour)).Obj()
	job.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel}
	return job
}

// rackOfJob is the rack the running Job's pods are pinned to.
func rackOfJob(ctx context.Context, g Gomega, job *batchv1.Job) string {
	fresh := &batchv1.Job{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
	g.Expect(ptr.Deref(fresh.Spec.Suspend, true)).To(BeFalse(), "job %s runs", job.Name)
	rack := fresh.Spec.Template.Spec.NodeSelector[rackLabel]
	g.Expect(rack).NotTo(BeEmpty(), "job %s is pinned to a rack", job.Name)
	return rack
}

var _ = Describe("serving takes back the quota it lent, rack-bound replicas included", func() {
	It("preempts the borrower in the only rack with room for a scaled-up LeaderWorkerSet replica, and nothing else", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-e2e-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		pool := ns.Name
		racks(ctx, pool, 3)

		By("a serving queue of two racks' GPUs that reclaims what it lends, and a training queue of one rack that borrows")
		cohort := pool
		serving := builders.ClusterQueue(pool+"-serving").Cohort(cohort).Quota(pool, builders.GPU, "32", "").Obj()
		serving.Spec.Preemption = berthv1.ClusterQueuePreemption{ReclaimWithinCohort: berthv1.PreemptAny,
			WithinClusterQueue: berthv1.PreemptLowerPriority}
		training := builders.ClusterQueue(pool+"-training").Cohort(cohort).Quota(pool, builders.GPU, "16", "32").Obj()
		for _, cq := range []*berthv1.ClusterQueue{serving, training} {
			Expect(env.Client.Create(ctx, cq)).To(Succeed())
			DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, cq)) })
		}
		Expect(env.Client.Create(ctx, builders.LocalQueue(pool, "serving", serving.Name))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(pool, "training", training.Name))).To(Succeed())

		By("one serving replica of an 8-GPU leader and an 8-GPU worker, required in one rack")
		set := servingSet(pool, "serve", 1)
		set.Labels[berthv1.QueueNameLabel] = "serving"
		set.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel}
		for _, l := range []corev1.ResourceList{set.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Resources.Requests,
			set.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Resources.Limits} {
			l[builders.GPU] = resource.MustParse("8")
		}
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, set)) })
		Eventually(func(g Gomega) int {
			running, _ := replicaStates(ctx, g, set, 1)
			return running
		}, timeout, interval).Should(Equal(1))

		By("training fills the other two racks: one within its quota, one on quota borrowed from serving")
		own := rackJob(pool, "own", "training")
		Expect(env.Client.Create(ctx, own)).To(Succeed())
		var ownRack string
		Eventually(func(g Gomega) { ownRack = rackOfJob(ctx, g, own) }, timeout, interval).Should(Succeed())
		borrower := rackJob(pool, "borrower", "training")
		Expect(env.Client.Create(ctx, borrower)).To(Succeed())
		var borrowedRack string
		Eventually(func(g Gomega) { borrowedRack = rackOfJob(ctx, g, borrower) }, timeout, interval).Should(Succeed())

		By("scaling serving from 1 to 3: the borrower is preempted, a replica runs in its rack, the third waits")
		scaled := time.Now()
		scaleTo(ctx, set, 3)
		Eventually(func(g Gomega) {
			fresh := &batchv1.Job{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(borrower), fresh)).To(Succeed())
			g.Expect(ptr.Deref(fresh.Spec.Suspend, false)).To(BeTrue(), "the borrower is stopped")
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			running, gated := replicaStates(ctx, g, set, 3)
			g.Expect(running).To(Equal(2))
			g.Expect(gated).To(Equal(1))
			inBorrowedRack := 0
			for _, idx := range []string{"0", "1", "2"} {
				for _, p := range replicaPods(ctx, g, set, idx) {
					if !isGated(&p) && p.Spec.NodeSelector[rackLabel] == borrowedRack {
						inBorrowedRack++
					}
				}
			}
			g.Expect(inBorrowedRack).To(Equal(2), "the new replica's leader and worker run in the borrower's rack")
		}, timeout, interval).Should(Succeed())
		AddReportEntry("reclaim: added replicas", jobsuite.StartTimes(scaled, 3*time.Minute, addedReplicas(ctx, set, 1, 3)))
		Consistently(func(g Gomega) string { return rackOfJob(ctx, g, own) }, held, interval).
			Should(Equal(ownRack), "training within its own quota is not preempted")
		Eventually(func(g Gomega) {
			waiting := 0
			for _, wl := range workloadsOf(ctx, g, set) {
				if lifecycle.MayRun(lifecycle.PhaseOf(&wl)) {
					continue
				}
				waiting++
				ex, ok := env.Berth().Scheduler.Explain(lifecycle.KeyOf(&wl))
				g.Expect(ok).To(BeTrue())
				g.Expect(ex.Reason).To(Equal(admission.InsufficientQuota), "the third replica needs quota no borrower holds")
			}
			g.Expect(waiting).To(Equal(1))
		}, timeout, interval).Should(Succeed())
	})
})
