package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/headroom"
	"github.com/berth-dev/berth/test/builders"
)

// The headroom controller against a real API server with the
// CapacityBuffer CRD installed: what it keeps for a HeadroomPolicy, in
// which domains, how it follows the target's scaling, and what its Ready
// condition says when it cannot keep any.
var _ = Describe("HeadroomPolicy", func() {
	const rack = "example.com/rack"
	var ns string

	// servingQueue is a ClusterQueue of gpus GPUs (nominal) for ns, with
	// two headroom pools, racks a and b, labelled and tainted for it.
	servingQueue := func(ctx context.Context, gpus string) string {
		cq := builders.ClusterQueue(ns).Quota(ns, builders.GPU, gpus, "").Obj()
		Expect(env.Client.Create(ctx, builders.Flavor(ns, map[string]string{"example.com/pool": ns}))).To(Succeed())
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "serving", cq.Name))).To(Succeed())
		for _, r := range []string{"a", "b"} {
			pool := builders.HeadroomPool(ns+"-headroom-"+r, ns, cq.Name, rack, r, map[string]string{"example.com/pool": ns})
			Expect(env.Client.Create(ctx, pool)).To(Succeed())
			DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, pool)) })
		}
		DeferCleanup(func(ctx context.Context) error {
			return client.IgnoreNotFound(env.Client.Delete(ctx, &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: cq.Name}}))
		})
		return cq.Name
	}

	// chat is a Deployment of 1-GPU replicas that tolerate the headroom
	// taint of clusterQueue and must run in one rack.
	chat := func(ctx context.Context, clusterQueue string, replicas int32) {
		d := builders.Deployment(ns, "chat", "serving", replicas, "1")
		d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual,
			Value: clusterQueue, Effect: corev1.TaintEffectNoSchedule}}
		Expect(env.Client.Create(ctx, d)).To(Succeed())
	}

	policy := func(sizing berthv1.HeadroomSizing) *berthv1.HeadroomPolicy {
		return &berthv1.HeadroomPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
			Spec: berthv1.HeadroomPolicySpec{TargetRef: berthv1.HeadroomTarget{Kind: "Deployment", Name: "chat"}, Sizing: sizing, TopologyLevel: rack}}
	}

	// buffers are the policy's CapacityBuffers, by the rack their
	// template pins them to, in pods.
	buffers := func(ctx context.Context, g Gomega) map[string]int32 {
		var list cbv1beta1.CapacityBufferList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{headroom.PolicyLabel: "chat"})).To(Succeed())
		out := map[string]int32{}
		for _, cb := range list.Items {
			var pt corev1.PodTemplate
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cb.Spec.PodTemplateRef.Name}, &pt)).To(Succeed())
			g.Expect(pt.Template.Labels).NotTo(HaveKey(berthv1.QueueNameLabel), "the buffer's pods are never queued")
			g.Expect(pt.Template.Spec.NodeSelector).To(HaveKey(berthv1.HeadroomLabel))
			out[pt.Template.Spec.NodeSelector[rack]] += ptr.Deref(cb.Spec.Replicas, 0)
		}
		return out
	}

	policyOf := func(ctx context.Context, g Gomega) *berthv1.HeadroomPolicy {
		var hp berthv1.HeadroomPolicy
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "chat"}, &hp)).To(Succeed())
		return &hp
	}

	ready := func(ctx context.Context, g Gomega) *metav1.Condition {
		hp := policyOf(ctx, g)
		c := meta.FindStatusCondition(hp.Status.Conditions, headroom.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		return c
	}

	// editChat changes the chat Deployment, reading it again after a
	// conflict.
	editChat := func(ctx context.Context, edit func(*appsv1.Deployment)) {
		Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "chat"}, &d)).To(Succeed())
			edit(&d)
			g.Expect(env.Client.Update(ctx, &d)).To(Succeed())
		}, timeout, interval).Should(Succeed())
	}

	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("keeps the sized headroom as CapacityBuffers spread over the queue's headroom racks, and follows the target's scaling", func(ctx SpecContext) {
		cq := servingQueue(ctx, "8")
		chat(ctx, cq, 2)
		Expect(env.Client.Create(ctx, policy(berthv1.HeadroomSizing{Mode: berthv1.HeadroomPercent, Percent: ptr.To[int32](100), Min: 1}))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(buffers(ctx, g)).To(Equal(map[string]int32{"a": 1, "b": 1}))
			g.Expect(ready(ctx, g).Reason).To(Equal("Kept"))
		}, timeout, interval).Should(Succeed())

		By("a Ready headroom node in rack a: the replica kept there is available, rack b's is not")
		readyNode(ctx, ns+"-a", 8, map[string]string{rack: "a", berthv1.HeadroomLabel: cq})
		Eventually(func(g Gomega) {
			hp := policyOf(ctx, g)
			g.Expect(hp.Status.Domains).To(ConsistOf(
				berthv1.HeadroomDomain{Name: "a", Replicas: 1, Available: 1}, berthv1.HeadroomDomain{Name: "b", Replicas: 1}))
			g.Expect(hp.Status.AvailableReplicas).To(BeEquivalentTo(1))
		}, timeout, interval).Should(Succeed())

		By("a pod that is no placeholder takes the node's room: nothing is available")
		taker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taker"}, Spec: corev1.PodSpec{NodeName: ns + "-a",
			Containers: []corev1.Container{{Name: "c", Image: "example.com/c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{builders.GPU: resource.MustParse("8")}, Limits: corev1.ResourceList{builders.GPU: resource.MustParse("8")}}}}}}
		Expect(env.Client.Create(ctx, taker)).To(Succeed())
		// Pods are not watched: the policy is looked at every minute, or,
		// here, when touched.
		Eventually(func(g Gomega) {
			hp := policyOf(ctx, g)
			hp.Annotations = map[string]string{"test/touched": taker.Name}
			g.Expect(env.Client.Update(ctx, hp)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) int32 { return policyOf(ctx, g).Status.AvailableReplicas }, timeout, interval).Should(BeZero())

		By("scaling to 5 replicas: 100 % would be 5 more, the quota of 8 GPUs holds 3")
		editChat(ctx, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })
		Eventually(func(g Gomega) map[string]int32 { return buffers(ctx, g) }, timeout, interval).Should(Equal(map[string]int32{"a": 2, "b": 1}))

		By("scaling to 8 replicas: the quota is full, no headroom is kept")
		editChat(ctx, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](8) })
		Eventually(func(g Gomega) map[string]int32 { return buffers(ctx, g) }, timeout, interval).Should(BeEmpty())
		Eventually(func(g Gomega) string { return ready(ctx, g).Message }, timeout, interval).Should(Equal("the sizing keeps no headroom now"))
	})

	It("says why it keeps nothing: replicas that cannot use it, and a queue without headroom nodes", func(ctx SpecContext) {
		cq := servingQueue(ctx, "8")
		Expect(env.Client.Create(ctx, builders.Deployment(ns, "chat", "serving", 2, "1"))).To(Succeed())
		Expect(env.Client.Create(ctx, policy(berthv1.HeadroomSizing{Mode: berthv1.HeadroomFixed, Replicas: ptr.To[int32](2)}))).To(Succeed())
		Eventually(func(g Gomega) {
			c := ready(ctx, g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal("ReplicasDoNotTolerate"))
			g.Expect(c.Message).To(ContainSubstring("add the toleration"))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) map[string]int32 { return buffers(ctx, g) }, "2s").Should(BeEmpty())

		By("a policy naming a level the headroom pools lack")
		editChat(ctx, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual,
				Value: cq, Effect: corev1.TaintEffectNoSchedule}}
		})
		var hp berthv1.HeadroomPolicy
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "chat"}, &hp)).To(Succeed())
		hp.Spec.TopologyLevel = "example.com/block"
		Expect(env.Client.Update(ctx, &hp)).To(Succeed())
		Eventually(func(g Gomega) string { return ready(ctx, g).Reason }, timeout, interval).Should(Equal("NoHeadroomNodes"))
		Expect(ready(ctx, Default).Message).To(ContainSubstring("label and taint (berth.dev/headroom=" + cq + ":NoSchedule)"))
	})
})
