package operators_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

const rackLabel = "example.com/rack"

var _ = Describe("LeaderWorkerSet replicas bound to a rack", func() {
	It("runs each replica's leader and workers in one rack, where kube-scheduler alone could split them", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-e2e-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		pool := ns.Name

		By("adding two racks of two 4-GPU nodes, of a flavor whose topology levels are rack and hostname")
		for _, rack := range []string{"r1", "r2"} {
			for i := range 2 {
				name := fmt.Sprintf("%s-%s-%d", pool, rack, i)
				// A product of their own keeps the other specs' flavors off these nodes.
				node := controlplane.GPUNode(name, 4, map[string]string{productLabel: pool, rackLabel: rack})
				Expect(env.Client.Create(ctx, node)).To(Succeed())
				DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, node)) })
				Expect(controlplane.WaitForNodeReady(ctx, env.Client, name)).To(Succeed())
			}
		}
		rf := builders.Flavor(pool, map[string]string{productLabel: pool})
		rf.Spec.TopologyLevels = []string{rackLabel, corev1.LabelHostname}
		Expect(env.Client.Create(ctx, rf)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(pool).Quota(pool, builders.GPU, "16", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(pool, "team", pool))).To(Succeed())

		By("serving two replicas of a 4-GPU leader and a 4-GPU worker, each required in one rack")
		set := servingSet(pool, "serve", 2)
		set.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel}
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, set)) })

		rackOf := func(g Gomega, nodeName string) string {
			node := &corev1.Node{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node)).To(Succeed())
			return node.Labels[rackLabel]
		}
		Eventually(func(g Gomega) {
			racks := map[string]string{}
			for _, idx := range []string{"0", "1"} {
				pods := replicaPods(ctx, g, set, idx)
				g.Expect(pods).To(HaveLen(2), "replica %s: the operator created its leader and worker", idx)
				var rack string
				for _, p := range pods {
					g.Expect(isGated(&p)).To(BeFalse())
					g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
					g.Expect(p.Spec.NodeSelector).To(HaveKey(rackLabel), "berth pins the replica's pods to its rack")
					got := rackOf(g, p.Spec.NodeName)
					g.Expect(got).To(Equal(p.Spec.NodeSelector[rackLabel]))
					if rack == "" {
						rack = got
					}
					g.Expect(got).To(Equal(rack), "replica %s: leader and worker in one rack", idx)
				}
				racks[idx] = rack
			}
			g.Expect(racks["0"]).NotTo(Equal(racks["1"]), "each rack holds one replica")
		}, timeout, interval).Should(Succeed())
	})
})
