package podgroup_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

var _ = Describe("pod group specifics", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
		Expect(env.Client.Create(ctx, nsObj)).To(Succeed())
		ns = nsObj.Name
		f := builders.Flavor(ns, map[string]string{"nvidia.com/gpu.product": ns})
		Expect(env.Client.Create(ctx, f)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(f.Name, builders.GPU, "8", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
	})

	It("gates a labelled pod at creation and leaves unlabelled pods alone", func(ctx SpecContext) {
		labelled := groupPods(ns, "gated", "team", "1")[0]
		plain := groupPods(ns, "plain", "team", "1")[0]
		delete(plain.Labels, berthv1.QueueNameLabel)
		Expect(env.Client.Create(ctx, labelled)).To(Succeed())
		Expect(env.Client.Create(ctx, plain)).To(Succeed())
		Expect(gated(labelled)).To(BeTrue())
		Expect(plain.Spec.SchedulingGates).To(BeEmpty())
	})

	It("admits a lone labelled pod as a group of one", func(ctx SpecContext) {
		lone := groupPods(ns, "lone", "team", "1")[0]
		delete(lone.Labels, berthv1.PodGroupLabel)
		delete(lone.Annotations, berthv1.PodGroupTotalCountAnnotation)
		lone.Spec.Containers[0].Resources.Requests[builders.GPU] = resource.MustParse("8")
		lone.Spec.Containers[0].Resources.Limits[builders.GPU] = resource.MustParse("8")
		Expect(env.Client.Create(ctx, lone)).To(Succeed())
		Eventually(func(g Gomega) bool {
			p := &corev1.Pod{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lone), p)).To(Succeed())
			return gated(p)
		}, timeout, interval).Should(BeFalse())
	})

	It("reports a group that has fewer pods than its count, and admits it once the rest exist", func(ctx SpecContext) {
		ps := groupPods(ns, "partial", "team", "2", "2")
		Expect(env.Client.Create(ctx, ps[0])).To(Succeed())
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, ps[0].Name), timeout, interval).Should(ContainElement(And(
			ContainSubstring("GroupIncomplete"), ContainSubstring("has 1 of its 2 pods"))))
		Consistently(func(g Gomega) bool {
			p := &corev1.Pod{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ps[0]), p)).To(Succeed())
			return gated(p)
		}, "2s", interval).Should(BeTrue())
		Expect(env.Client.Create(ctx, ps[1])).To(Succeed())
		Eventually(func(g Gomega) bool {
			for _, want := range ps {
				p := &corev1.Pod{}
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(want), p)).To(Succeed())
				if gated(p) {
					return false
				}
			}
			return true
		}, timeout, interval).Should(BeTrue())
	})
})
