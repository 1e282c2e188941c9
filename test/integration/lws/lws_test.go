package lws_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)

var _ = Describe("LeaderWorkerSet replicas", func() {
	It("queues a new replica as its own gang when scaled up, and releases it when scaled down", func(ctx SpecContext) {
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
		Expect(env.Client.Create(ctx, nsObj)).To(Succeed())
		ns := nsObj.Name
		f := builders.Flavor(ns, map[string]string{"nvidia.com/gpu.product": ns})
		Expect(env.Client.Create(ctx, f)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(f.Name, builders.GPU, "8", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())

		set := newLWS(ns, "serve", "team")
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		Eventually(func(g Gomega) bool {
			started, _, err := adapter{}.State(ctx, env.Client, set)
			g.Expect(err).NotTo(HaveOccurred())
			return started
		}, timeout, interval).Should(BeTrue())

		By("scaling up: the second replica is a gang of its own, held while the first holds the quota")
		Expect(scale(ctx, env.Client, set, 2)).To(Succeed())
		Eventually(func(g Gomega) {
			_, _, err := adapter{}.State(ctx, env.Client, set) // the operator creates the new replica's pods
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
