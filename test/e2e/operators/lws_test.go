package operators_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// servingSet is a LeaderWorkerSet of replicas replicas, each a leader and
// a worker with 4 GPUs each: one 8-GPU gang per replica.
func servingSet(ns, name string, replicas int32) *lwsv1.LeaderWorkerSet {
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec: lwsv1.LeaderWorkerSetSpec{
			StartupPolicy:   lwsv1.LeaderCreatedStartupPolicy,
			RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			Replicas:        ptr.To(replicas),
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
				Size: ptr.To[int32](2),
				WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "serve", Image: "registry.invalid/serve:latest", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{builders.GPU: resource.MustParse("4")},
						Limits:   corev1.ResourceList{builders.GPU: resource.MustParse("4")},
					}}}}},
			},
		},
	}
}

func isGated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == berthv1.AdmissionGate })
}

// replicaPods lists the pods of one replica.
func replicaPods(ctx SpecContext, g Gomega, set *lwsv1.LeaderWorkerSet, index string) []corev1.Pod {
	return podsWith(ctx, g, set.Namespace, map[string]string{lwsv1.SetNameLabelKey: set.Name, lwsv1.GroupIndexLabelKey: index})
}

var _ = Describe("LeaderWorkerSets run by the LeaderWorkerSet operator", func() {
	It("admits each replica whole, holds the replica that does not fit, and releases a replica's quota when scaled down", func(ctx SpecContext) {
		ns := setup(ctx)
		set := servingSet(ns, "serve", 2)
		Expect(env.Client.Create(ctx, set)).To(Succeed())

		By("running one replica's leader and worker together on the flavor's nodes, and gating the other's")
		var running, waiting string
		Eventually(func(g Gomega) {
			g.Expect(workloadsOf(ctx, g, set)).To(HaveLen(2))
			states := map[string]bool{}
			for _, idx := range []string{"0", "1"} {
				pods := replicaPods(ctx, g, set, idx)
				g.Expect(pods).To(HaveLen(2), "replica %s: the operator created its leader and worker", idx)
				gated := 0
				for _, p := range pods {
					if isGated(&p) {
						gated++
						continue
					}
					g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(productLabel, product))
					g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
				}
				g.Expect(gated).To(BeElementOf(0, 2), "a replica's pods are released together")
				states[idx] = gated == 0
			}
			g.Expect(states["0"]).NotTo(Equal(states["1"]), "exactly one replica fits in the quota")
			running, waiting = "0", "1"
			if states["1"] {
				running, waiting = "1", "0"
			}
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			for _, p := range replicaPods(ctx, g, set, waiting) {
				g.Expect(isGated(&p)).To(BeTrue())
			}
		}, held, interval).Should(Succeed())
		_ = running

		By("scaling down to one replica: the removed replica's workload goes, and the remaining one runs")
		Eventually(func(g Gomega) {
			fresh := &lwsv1.LeaderWorkerSet{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(set), fresh)).To(Succeed())
			fresh.Spec.Replicas = ptr.To[int32](1)
			g.Expect(env.Client.Update(ctx, fresh)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(workloadsOf(ctx, g, set)).To(HaveLen(1))
			pods := replicaPods(ctx, g, set, "0")
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(isGated(&p)).To(BeFalse())
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
			}
		}, timeout, interval).Should(Succeed())
	})
})
