package operators_test

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// scaleTo sets the LeaderWorkerSet's replicas, as kubectl scale or an HPA
// would.
func scaleTo(ctx SpecContext, set *lwsv1.LeaderWorkerSet, replicas int32) {
	Eventually(func(g Gomega) {
		fresh := &lwsv1.LeaderWorkerSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), fresh)).To(Succeed())
		fresh.Spec.Replicas = ptr.To(replicas)
		g.Expect(env.Client.Update(ctx, fresh)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// replicaStates counts the set's replicas whose pods all run, and those
// whose pods are all gated; a replica with some of each fails g.
func replicaStates(ctx SpecContext, g Gomega, set *lwsv1.LeaderWorkerSet, replicas int) (running, gated int) {
	for i := range replicas {
		pods := replicaPods(ctx, g, set, strconv.Itoa(i))
		g.Expect(pods).NotTo(BeEmpty(), "replica %d has its pods", i)
		held := 0
		for _, p := range pods {
			if isGated(&p) {
				held++
				continue
			}
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
		}
		switch held {
		case 0:
			running++
		case len(pods):
			gated++
		default:
			g.Expect(held).To(BeElementOf(0, len(pods)), "replica %d is released whole or not at all", i)
		}
	}
	return running, gated
}

// addedReplicas lists the pods of the set's replicas from..to-1, by index.
func addedReplicas(ctx SpecContext, set *lwsv1.LeaderWorkerSet, from, to int) map[string][]corev1.Pod {
	out := map[string][]corev1.Pod{}
	for i := from; i < to; i++ {
		idx := strconv.Itoa(i)
		out[idx] = podsWith(ctx, Default, set.Namespace, map[string]string{lwsv1.SetNameLabelKey: set.Name, lwsv1.GroupIndexLabelKey: idx})
	}
	return out
}

var _ = Describe("a LeaderWorkerSet scaled like a model server", func() {
	It("queues the replicas an HPA adds as gangs, admits all that quota allows, and releases removed ones at once", func(ctx SpecContext) {
		ns := setup(ctx)
		// One 1-GPU leader and one 1-GPU worker per replica: the queue's 8
		// GPUs hold four replicas.
		set := servingSet(ns, "burst", 1)
		set.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Resources.Requests[builders.GPU] = resource.MustParse("1")
		set.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Resources.Limits[builders.GPU] = resource.MustParse("1")
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		Eventually(func(g Gomega) int {
			running, _ := replicaStates(ctx, g, set, 1)
			return running
		}, timeout, interval).Should(Equal(1))

		By("scaling from 1 to 20 in one step: four replicas run, sixteen wait whole with a Workload each")
		scaled := time.Now()
		scaleTo(ctx, set, 20)
		Eventually(func(g Gomega) {
			g.Expect(workloadsOf(ctx, g, set)).To(HaveLen(20))
			running, gated := replicaStates(ctx, g, set, 20)
			g.Expect(running).To(Equal(4))
			g.Expect(gated).To(Equal(16))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			waiting := 0
			for _, wl := range workloadsOf(ctx, g, set) {
				if !lifecycle.MayRun(lifecycle.PhaseOf(&wl)) {
					waiting++
					ex, ok := env.Berth().Scheduler.Explain(lifecycle.KeyOf(&wl))
					g.Expect(ok).To(BeTrue(), "workload %s is pending in the engine", wl.Name)
					g.Expect(ex.Reason).To(Equal(admission.InsufficientQuota), "workload %s says why it waits", wl.Name)
				}
			}
			g.Expect(waiting).To(Equal(16))
		}, timeout, interval).Should(Succeed())

		AddReportEntry("scale 1 to 20: added replicas", jobsuite.StartTimes(scaled, 3*time.Minute, addedReplicas(ctx, set, 1, 20)))

		By("a 4-GPU job queued behind the waiting replicas")
		job := builders.Job(ns, "next", "team").Request(builders.GPU, "4").Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		// Its pod runs on nodes the suite's other specs share: it goes
		// with the spec.
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(podsWith(ctx, g, ns, map[string]string{batchv1.JobNameLabel: job.Name})).To(BeEmpty())
			}, timeout, interval).Should(Succeed())
		})

		By("scaling down to 2: the removed replicas' Workloads go, and their quota admits the job")
		scaleTo(ctx, set, 2)
		Eventually(func(g Gomega) {
			g.Expect(workloadsOf(ctx, g, set)).To(HaveLen(2))
			running, _ := replicaStates(ctx, g, set, 2)
			g.Expect(running).To(Equal(2))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) bool {
			fresh := &batchv1.Job{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
			return ptr.Deref(fresh.Spec.Suspend, true)
		}, timeout, interval).Should(BeFalse(), "the job runs on the quota the removed replicas held")

		By("scaling to zero releases every replica's quota")
		scaleTo(ctx, set, 0)
		Eventually(func(g Gomega) []berthv1.Workload { return workloadsOf(ctx, g, set) }, timeout, interval).Should(BeEmpty())
	})
})
