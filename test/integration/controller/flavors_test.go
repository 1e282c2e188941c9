package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
)

// A flavor's nodeLabels are where berth sends the pods it admits there: a
// Job whose own node selector contradicts them must go to another flavor,
// or wait saying so, never be admitted where its pods cannot run.
var _ = Describe("flavor choice and the job's own node selector", func() {
	const product = "nvidia.com/gpu.product"

	It("admits a pinned Job on the flavor its selector names, and holds one no flavor matches", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		a100, h100 := ns+"-a100", ns+"-h100"
		for name, value := range map[string]string{a100: "NVIDIA-A100", h100: "NVIDIA-H100"} {
			Expect(env.Client.Create(ctx, builders.Flavor(name, map[string]string{product: value}))).To(Succeed())
		}
		// One resource group, a100 first, both with room.
		cq := builders.ClusterQueue(ns).Quota(a100, builders.GPU, "8", "").Obj()
		cq.Spec.ResourceGroups[0].Flavors = append(cq.Spec.ResourceGroups[0].Flavors, berthv1.FlavorQuotas{Name: h100,
			Resources: []berthv1.ResourceQuota{{Name: builders.GPU, NominalQuota: resource.MustParse("8")}}})
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
		tenant, err := env.Tenant(ctx, ns, "pinner", "edit")
		Expect(err).NotTo(HaveOccurred())
		pinned := func(name, value string) *batchv1.Job {
			j := builders.Job(ns, name, "team").Request(builders.GPU, "4").Obj()
			j.Spec.Template.Spec.NodeSelector = map[string]string{product: value, "example.com/pool": "inference"}
			Expect(tenant.Create(ctx, j)).To(Succeed())
			return j
		}

		By("a Job pinned to H100 goes to the h100 flavor although a100 comes first and has room")
		onH100 := pinned("on-h100", "NVIDIA-H100")
		Eventually(func(g Gomega) {
			wl, err := workloadOf(ctx, onH100)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Flavors).To(HaveKeyWithValue(builders.GPU, h100))
			job := &batchv1.Job{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(onH100), job)).To(Succeed())
			g.Expect(job.Spec.Suspend).To(HaveValue(BeFalse()))
			g.Expect(job.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{product: "NVIDIA-H100", "example.com/pool": "inference"}))
		}, timeout, interval).Should(Succeed())

		By("a Job pinned to a product no flavor has waits with NoMatchingFlavor and a Warning")
		nowhere := pinned("on-b200", "NVIDIA-B200")
		Eventually(func(g Gomega) {
			wl, err := workloadOf(ctx, nowhere)
			g.Expect(err).NotTo(HaveOccurred())
			c := condition(wl, berthv1.ConditionQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(string(berthv1.ReasonNoMatchingFlavor)))
			g.Expect(c.Message).To(And(ContainSubstring("nodeSelector example.com/pool=inference,"+product+"=NVIDIA-B200"),
				ContainSubstring(a100+" ("+product+"=NVIDIA-A100)"), ContainSubstring(h100+" ("+product+"=NVIDIA-H100)")))
		}, timeout, interval).Should(Succeed())
		wl, err := workloadOf(ctx, nowhere)
		Expect(err).NotTo(HaveOccurred())
		Eventually(eventReasons(ctx, ns, wl.Name), timeout, interval).Should(ContainElement(And(
			HavePrefix(lifecycle.EventInadmissible+":"), ContainSubstring("no flavor of ClusterQueue"))))
		Consistently(suspended(ctx, nowhere), "2s", interval).Should(BeTrue())

		By("and is admitted once a flavor's labels match it")
		rf := &berthv1.ResourceFlavor{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: a100}, rf)).To(Succeed())
		rf.Spec.NodeLabels[product] = "NVIDIA-B200"
		Expect(env.Client.Update(ctx, rf)).To(Succeed())
		Eventually(suspended(ctx, nowhere), timeout, interval).Should(BeFalse())
		job := &batchv1.Job{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(nowhere), job)).To(Succeed())
		Expect(job.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue(product, "NVIDIA-B200"))
	})
})
