package provisioning_test

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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

// productLabel tells the nodes of one flavor apart by GPU product, as GPU
// feature discovery labels them.
const productLabel = "nvidia.com/gpu.product"

var _ = Describe("gangs with constraints of their own", func() {
	It("(g) runs a rack-bound gang whose nodeSelector only one rack's nodes satisfy in that rack, on existing capacity", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, nil)
		for rack, product := range map[string]string{"r1": "NVIDIA-H100", "r2": "NVIDIA-H200"} {
			for i := range 2 {
				labels := rackLabels(ns, rack)
				labels[productLabel] = product
				addNode(ctx, fmt.Sprintf("%s-%s-n%d", ns, rack, i), labels)
			}
		}
		// Without its own constraint the gang would go to r1, the first of
		// two equally tight racks, where its pods cannot bind.
		job := gangJob(ns, "h200-only", 2, 2*time.Second)
		job.Spec.Template.Spec.NodeSelector = map[string]string{productLabel: "NVIDIA-H200"}
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r2"}))
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("(h) books new nodes in the rack whose pool's nodes satisfy the gang's nodeSelector, and asks for the job's own pods", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, nil)
		addPool(ctx, ns, "r1", 2, map[string]string{productLabel: "NVIDIA-H100"})
		addPool(ctx, ns, "r2", 2, map[string]string{productLabel: "NVIDIA-H200"})
		job := gangJob(ns, "h200-only", 2, 2*time.Second)
		job.Spec.Template.Spec.NodeSelector = map[string]string{productLabel: "NVIDIA-H200"}
		job.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		Expect(env.Client.Create(ctx, job)).To(Succeed())

		By("the first request is pinned to r2 and its template is the job's pod, pinned")
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			g.Expect(wl.Status.Provisioning).NotTo(BeNil())
			g.Expect(wl.Status.Provisioning.Attempt).To(Equal(int32(1)))
			pr := request(ctx, g, job)
			tmpl := &corev1.PodTemplate{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.PodSets[0].PodTemplateRef.Name}, tmpl)).To(Succeed())
			g.Expect(tmpl.Template.Spec.NodeSelector).To(And(HaveKeyWithValue(rackLabel, "r2"), HaveKeyWithValue(productLabel, "NVIDIA-H200")))
			g.Expect(tmpl.Template.Spec.Tolerations).To(ContainElement(job.Spec.Template.Spec.Tolerations[0]))
			g.Expect(tmpl.Template.Spec.Containers).To(HaveLen(1))
			g.Expect(tmpl.Template.Spec.Containers[0].Image).To(Equal(job.Spec.Template.Spec.Containers[0].Image))
		}, timeout, interval).Should(Succeed())
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r2"}))
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(0), "no node is added where the pods cannot run")
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("(i) places a gang with one-pod-per-node anti-affinity one pod per node, and kube-scheduler binds it so", func(ctx SpecContext) {
		ns := rackSetup(ctx, []string{"r1", "r2", "r2"}, nil)
		// Two 2-GPU pods fit r1's one node, the tightest rack, but must not
		// share a node: only r2 can take the gang.
		job := spreadJob(ns, "spread")
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r2"}))
		Eventually(podsPerNode(ctx, job), timeout, interval).Should(And(HaveLen(2), Not(HaveKey(""))))
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("(j) books a new node per pod for a gang whose pods must not share a node, and binds them so", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, map[string]int32{"r1": 3})
		job := spreadJob(ns, "spread")
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(podsPerNode(ctx, job), timeout, interval).Should(And(HaveLen(2), Not(HaveKey(""))))
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(2), "one 8-GPU node would hold both 2-GPU pods, but not bind them both")
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})
})

// spreadJob is a rack-bound gang of two 2-GPU pods whose required
// anti-affinity on the hostname keeps them on different nodes.
func spreadJob(ns, name string) *batchv1.Job {
	job := gangJob(ns, name, 2, 2*time.Second)
	small := corev1.ResourceList{controlplane.GPUResource: resource.MustParse("2")}
	job.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: small, Limits: small}
	job.Spec.Template.Labels = map[string]string{"app": name}
	job.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		}},
	}}
	return job
}

// podsPerNode counts the job's pods per node ("" for unbound ones).
func podsPerNode(ctx context.Context, job *batchv1.Job) func(Gomega) map[string]int {
	return func(g Gomega) map[string]int {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
		perNode := map[string]int{}
		for _, p := range pods.Items {
			perNode[p.Spec.NodeName]++
		}
		return perNode
	}
}
