package kinds_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// startedLWS creates a namespace whose queue "team" has gpus GPUs of quota
// and a LeaderWorkerSet "serve" in it, and waits until its replica started.
func startedLWS(ctx context.Context, gpus string) (string, *lwsv1.LeaderWorkerSet) {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
	Expect(env.Client.Create(ctx, nsObj)).To(Succeed())
	ns := nsObj.Name
	f := builders.Flavor(ns, map[string]string{"nvidia.com/gpu.product": ns})
	Expect(env.Client.Create(ctx, f)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(f.Name, builders.GPU, gpus, "").Obj())).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
	set := newLWS(ns, "serve", "team")
	Expect(env.Client.Create(ctx, set)).To(Succeed())
	Eventually(func(g Gomega) bool {
		started, _, err := lwsAdapter{}.State(ctx, env.Client, set)
		g.Expect(err).NotTo(HaveOccurred())
		return started
	}, timeout, interval).Should(BeTrue())
	return ns, set
}

var _ = Describe("LeaderWorkerSet replicas", func() {
	It("queues a new replica as its own gang when scaled up, and releases it when scaled down", func(ctx SpecContext) {
		ns, set := startedLWS(ctx, "8")

		By("scaling up: the second replica is a gang of its own, held while the first holds the quota")
		Expect(scale(ctx, env.Client, set, 2)).To(Succeed())
		Eventually(func(g Gomega) {
			_, _, err := lwsAdapter{}.State(ctx, env.Client, set) // the operator creates the new replica's pods
			g.Expect(err).NotTo(HaveOccurred())
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, set)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wls).To(HaveLen(2))
			admitted := 0
			for _, wl := range wls {
				if meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted) {
					admitted++
				}
			}
			g.Expect(admitted).To(Equal(1))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			pod := &corev1.Pod{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "serve-1"}, pod)).To(Succeed())
			g.Expect(gated(pod)).To(BeTrue())
		}, "2s", interval).Should(Succeed())

		By("scaling down: the second replica's workload is deleted")
		Expect(scale(ctx, env.Client, set, 1)).To(Succeed())
		Eventually(func(g Gomega) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, set)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wls).To(HaveLen(1))
		}, timeout, interval).Should(Succeed())
	})
})

var _ = Describe("LeaderWorkerSet rolling updates", func() {
	It("evicts and requeues whole a replica whose pods ask for more GPUs after an update", func(ctx SpecContext) {
		ns, set := startedLWS(ctx, "16")

		By("raising each pod's GPUs from 4 to 8 in the template")
		Eventually(func() error {
			fresh := &lwsv1.LeaderWorkerSet{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), fresh); err != nil {
				return err
			}
			res := &fresh.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec.Containers[0].Resources
			res.Requests[builders.GPU], res.Limits[builders.GPU] = resource.MustParse("8"), resource.MustParse("8")
			return env.Client.Update(ctx, fresh)
		}, timeout, interval).Should(Succeed())
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, set.Name), timeout, interval).Should(ContainElement(And(
			HavePrefix("Resized:"), ContainSubstring("8 nvidia.com/gpu per pod, admitted for 4"))))

		By("admitting it again for its new size, with no pod of the old size left running")
		Eventually(func(g Gomega) {
			_, _, err := lwsAdapter{}.State(ctx, env.Client, set) // the operator creates the pods again
			g.Expect(err).NotTo(HaveOccurred())
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, set)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wls).To(HaveLen(1))
			wl := wls[0]
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted)).To(BeTrue())
			for _, ps := range wl.Spec.PodSets {
				g.Expect(ps.Requests.Name(builders.GPU, "").String()).To(Equal("8"), "pod set %s", ps.Name)
			}
			pods := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			for _, p := range pods.Items {
				if !gated(&p) {
					g.Expect(p.Spec.Containers[0].Resources.Requests.Name(builders.GPU, "").String()).To(Equal("8"), "released pod %s", p.Name)
				}
			}
		}, timeout, interval).Should(Succeed())
	})
})
