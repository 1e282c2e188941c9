package kinds_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/headroom"
	"github.com/berth-dev/berth/test/builders"
)

// Where cluster-autoscaler serves no CapacityBuffer (this suite installs
// none), a HeadroomPolicy's headroom is kept as placeholder pods in
// berth's namespace: a Deployment per rack, of the replica's pods'
// requests, pinned to the queue's headroom nodes in that rack, at the
// placeholders' low priority; deleting the policy deletes them.
var _ = Describe("HeadroomPolicy without CapacityBuffers", func() {
	const rack = "example.com/rack"

	It("keeps rack-bound LeaderWorkerSet replicas' headroom as placeholder pods in each rack, and removes them with the policy", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		system := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "berth-system"}}
		Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, system))).To(Succeed())
		// newNamespace made flavor ns and a ClusterQueue of its own.
		cq := builders.ClusterQueue(ns+"-serving").Quota(ns, builders.GPU, "32", "").Obj()
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, cq)) })
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "serving", cq.Name))).To(Succeed())
		for _, r := range []string{"r1", "r2"} {
			pool := builders.HeadroomPool(ns+"-"+r, ns, cq.Name, rack, r, map[string]string{"nvidia.com/gpu.product": ns})
			Expect(env.Client.Create(ctx, pool)).To(Succeed())
			DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, pool)) })
		}

		By("a LeaderWorkerSet of 2 × 4-GPU replicas that must run in one rack, one replica, and a policy of 3")
		set := servingLWS(ns, cq.Name)
		Expect(env.Client.Create(ctx, set)).To(Succeed())
		hp := &berthv1.HeadroomPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: berthv1.HeadroomPolicySpec{
			TargetRef: berthv1.HeadroomTarget{Kind: "LeaderWorkerSet", Name: set.Name},
			Sizing:    berthv1.HeadroomSizing{Mode: berthv1.HeadroomFixed, Replicas: ptr.To[int32](3)}}}
		Expect(env.Client.Create(ctx, hp)).To(Succeed())

		By("two replicas' pods in r1 and one's in r2, each a placeholder asking for 4 GPUs, pinned and tolerating")
		placeholders := func(g Gomega) map[string]appsv1.Deployment {
			var list appsv1.DeploymentList
			g.Expect(env.Client.List(ctx, &list, client.InNamespace("berth-system"),
				client.MatchingLabels{headroom.PolicyLabel: "chat", headroom.PolicyNamespaceLabel: ns})).To(Succeed())
			out := map[string]appsv1.Deployment{}
			for _, d := range list.Items {
				out[d.Spec.Template.Spec.NodeSelector[rack]] = d
			}
			return out
		}
		Eventually(func(g Gomega) {
			got := placeholders(g)
			g.Expect(got).To(HaveLen(2))
			g.Expect(*got["r1"].Spec.Replicas).To(BeEquivalentTo(4))
			g.Expect(*got["r2"].Spec.Replicas).To(BeEquivalentTo(2))
			for _, d := range got {
				spec := d.Spec.Template.Spec
				g.Expect(spec.PriorityClassName).To(Equal(headroom.DefaultPriorityClass))
				g.Expect(spec.NodeSelector).To(HaveKeyWithValue(berthv1.HeadroomLabel, cq.Name))
				g.Expect(spec.Tolerations).To(ContainElement(HaveField("Value", cq.Name)))
				g.Expect(spec.Containers[0].Resources.Requests).To(HaveKeyWithValue(builders.GPU, resource.MustParse("4")))
				g.Expect(spec.Containers[0].Resources.Limits).To(HaveKeyWithValue(builders.GPU, resource.MustParse("4")))
				g.Expect(d.Spec.Template.Labels).NotTo(HaveKey(berthv1.QueueNameLabel))
			}
			var got2 berthv1.HeadroomPolicy
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hp), &got2)).To(Succeed())
			g.Expect(got2.Status.Mechanism).To(Equal(headroom.HeadroomByPlaceholder))
			c := meta.FindStatusCondition(got2.Status.Conditions, headroom.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(Equal("3 replicas' worth kept as placeholder pods: 2 in example.com/rack=r1, 1 in example.com/rack=r2"))
		}, timeout, interval).Should(Succeed())

		By("deleting the policy deletes its placeholders, then the policy")
		Expect(env.Client.Delete(ctx, hp)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(placeholders(g)).To(BeEmpty())
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(hp), &berthv1.HeadroomPolicy{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the policy is still there: %v", err)
		}, timeout, interval).Should(Succeed())
	})
})

// servingLWS is a LeaderWorkerSet in queue serving of one replica of two
// 4-GPU pods that must run in one rack, tolerating clusterQueue's
// headroom taint.
func servingLWS(ns, clusterQueue string) *lwsv1.LeaderWorkerSet {
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "chat"}}, Spec: corev1.PodSpec{
		Tolerations: []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual, Value: clusterQueue, Effect: corev1.TaintEffectNoSchedule}},
		Containers: []corev1.Container{{Name: "server", Image: "example.com/server", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{builders.GPU: resource.MustParse("4")}, Limits: corev1.ResourceList{builders.GPU: resource.MustParse("4")}}}}}}
	return &lwsv1.LeaderWorkerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat", Labels: map[string]string{berthv1.QueueNameLabel: "serving"},
			Annotations: map[string]string{berthv1.TopologyRequiredAnnotation: "example.com/rack"}},
		Spec: lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To[int32](1),
			StartupPolicy: lwsv1.LeaderCreatedStartupPolicy, RolloutStrategy: lwsv1.RolloutStrategy{Type: lwsv1.RollingUpdateStrategyType},
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To[int32](2), WorkerTemplate: tpl}},
	}
}
