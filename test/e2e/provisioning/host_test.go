package provisioning_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

// hostSetup creates, for one spec, a namespace, a flavor with levels zone,
// rack and kubernetes.io/hostname that books capacity IfNeeded, a
// ClusterQueue with 64 GPUs of it and a LocalQueue "team"; in rack r1, two
// Ready 4-GPU nodes (room for one 4-GPU pod each, for none of the gangs
// below whole), a pool "<ns>-r1-small" of up to four 4-GPU nodes and a pool
// "<ns>-r1" of up to bigNodes 8-GPU nodes.
func hostSetup(ctx context.Context, bigNodes int32) string {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-e2e-"}}
	Expect(env.Client.Create(ctx, nsObj)).To(Succeed())
	ns := nsObj.Name
	Expect(env.Client.Create(ctx, &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: berthv1.ResourceFlavorSpec{
		NodeLabels: map[string]string{poolLabel: ns}, TopologyLevels: []string{zoneLabel, rackLabel, corev1.LabelHostname},
		Provisioning: &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 5, BackoffSeconds: 1,
			CapacityNotFoundSeconds: notFoundBound}}})).To(Succeed())
	Expect(env.Client.Create(ctx, &berthv1.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: berthv1.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}, ResourceGroups: []berthv1.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{controlplane.GPUResource},
			Flavors: []berthv1.FlavorQuotas{{Name: ns, Resources: []berthv1.ResourceQuota{
				{Name: controlplane.GPUResource, NominalQuota: resource.MustParse("64")}}}},
		}}},
	})).To(Succeed())
	Expect(env.Client.Create(ctx, &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		Spec: berthv1.LocalQueueSpec{ClusterQueue: ns}})).To(Succeed())
	for _, name := range []string{ns + "-r1-half0", ns + "-r1-half1"} {
		node := controlplane.GPUNode(name, 4, rackLabels(ns, "r1"))
		Expect(env.Client.Create(ctx, node)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, node)) })
		Expect(controlplane.WaitForNodeReady(ctx, env.Client, name)).To(Succeed())
	}
	addSizedPool(ctx, ns, ns+"-r1-small", 4, 4)
	addSizedPool(ctx, ns, ns+"-r1", 8, bigNodes)
	return ns
}

// addSizedPool creates the CapacityPool name of up to maxNodes nodes of
// gpus GPUs each, of the flavor in rack r1; it and its nodes are deleted
// after the spec.
func addSizedPool(ctx context.Context, flavor, name string, gpus int, maxNodes int32) {
	labels := rackLabels(flavor, "r1")
	labels[berthv1.CapacityPoolLabel] = name
	pool := &berthv1.CapacityPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.CapacityPoolSpec{Flavor: flavor, MaxNodes: maxNodes, NodeTemplate: berthv1.NodeTemplate{
			Labels: labels, Allocatable: controlplane.GPUNode("template", gpus, nil).Status.Allocatable,
		}},
	}
	Expect(env.Client.Create(ctx, pool)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, pool)) })
	DeferCleanup(deleteNodesOf, pool.Name)
}

// hostGang submits a Job of two pods of gpus GPUs each that must both run
// on one node.
func hostGang(ctx context.Context, ns, name string, gpus int64, runFor time.Duration) *batchv1.Job {
	job := gangJob(ns, name, 2, runFor)
	job.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: corev1.LabelHostname}
	perPod := corev1.ResourceList{controlplane.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}
	job.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: perPod, Limits: perPod}
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	return job
}

// nodesOf returns the nodes the job's pods are bound to, once all pods of
// it are.
func nodesOf(ctx context.Context, job *batchv1.Job) func(Gomega) []string {
	return func(g Gomega) []string {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
		var nodes []string
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
			nodes = append(nodes, p.Spec.NodeName)
		}
		g.Expect(nodes).To(HaveLen(int(*job.Spec.Parallelism)))
		return nodes
	}
}

var _ = Describe("a gang that must fit one node", func() {
	It("(h1) a 2-pod gang required on one host, nothing free, a pool that can grow: one new node is created, both pods run on it", func(ctx SpecContext) {
		ns := hostSetup(ctx, 2)
		big := ns + "-r1"
		job := hostGang(ctx, ns, "serve", 4, 3*time.Second)

		By("the request asks for both pods on one node of the pool whose node holds them, the node not named yet")
		Eventually(func(g Gomega) {
			pr := request(ctx, g, job)
			g.Expect(pr.Spec.PodSets).To(HaveLen(1))
			g.Expect(pr.Spec.PodSets[0].Count).To(Equal(int32(2)))
			tmpl := &corev1.PodTemplate{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.PodSets[0].PodTemplateRef.Name}, tmpl)).To(Succeed())
			g.Expect(tmpl.Template.Spec.NodeSelector).To(And(HaveKeyWithValue(rackLabel, "r1"),
				HaveKeyWithValue(berthv1.CapacityPoolLabel, big), Not(HaveKey(corev1.LabelHostname))))
		}, timeout, interval).Should(Succeed())

		By("both pods run on the one new node of that pool, to which the admission pins them")
		var nodes []string
		Eventually(func(g Gomega) {
			nodes = nodesOf(ctx, job)(g)
			g.Expect(nodes[1]).To(Equal(nodes[0]), "both pods on one node")
		}, timeout, interval).Should(Succeed())
		node := &corev1.Node{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: nodes[0]}, node)).To(Succeed())
		Expect(node.Labels).To(HaveKeyWithValue(berthv1.CapacityPoolLabel, big), "the new node, not a half-free one")
		Expect(poolNodes(ctx, big)(Default)).To(Equal(1))
		Expect(poolNodes(ctx, ns+"-r1-small")(Default)).To(Equal(0), "the pool whose node is too small is not grown")
		Eventually(func(g Gomega) {
			t := workloadOf(ctx, g, job).Status.Admission.Topology
			g.Expect(t).NotTo(BeNil())
			g.Expect(t.NodeSelector()).To(HaveKeyWithValue(corev1.LabelHostname, nodes[0]))
		}, timeout, interval).Should(Succeed())
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("(h2) a gang no pool's node can hold says so on its Workload, and books nothing", func(ctx SpecContext) {
		ns := hostSetup(ctx, 2)
		job := hostGang(ctx, ns, "serve", 8, 3*time.Second)

		Eventually(func(g Gomega) {
			qr := meta.FindStatusCondition(workloadOf(ctx, g, job).Status.Conditions, berthv1.ConditionQuotaReserved)
			g.Expect(qr).NotTo(BeNil())
			g.Expect(qr.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(qr.Reason).To(Equal(string(berthv1.ReasonExceedsDomainCapacity)))
			g.Expect(qr.Message).To(ContainSubstring("it needs 16 nvidia.com/gpu on one node, the largest node a pool offers has 8"))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(workloadOf(ctx, g, job).Status.Provisioning).To(BeNil())
		}, held, interval).Should(Succeed())
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(0))
	})

	It("(h3) a gang waiting for a node of a pool at its maximum says so on its Workload", func(ctx SpecContext) {
		ns := hostSetup(ctx, 1)
		first := hostGang(ctx, ns, "first", 4, 30*time.Second)
		Eventually(nodesOf(ctx, first), timeout, interval).Should(HaveLen(2))

		By("the pool's one node runs the first gang: the second waits, and its Workload says why")
		second := hostGang(ctx, ns, "second", 4, 3*time.Second)
		Eventually(func(g Gomega) {
			qr := meta.FindStatusCondition(workloadOf(ctx, g, second).Status.Conditions, berthv1.ConditionQuotaReserved)
			g.Expect(qr).NotTo(BeNil())
			g.Expect(qr.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(qr.Reason).To(Equal(string(berthv1.ReasonTopologyUnavailable)))
			g.Expect(qr.Message).To(ContainSubstring("can create no more nodes now"))
		}, timeout, interval).Should(Succeed())
		Expect(poolNodes(ctx, ns+"-r1-small")(Default)).To(Equal(0))

		By("once the first gang is done, the second runs on the same node")
		Eventually(jobsuite.Completed(ctx, env.Client, first), timeout, interval).Should(BeTrue())
		Eventually(func(g Gomega) {
			nodes := nodesOf(ctx, second)(g)
			g.Expect(nodes[1]).To(Equal(nodes[0]))
		}, timeout, interval).Should(Succeed())
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(1))
	})
})
