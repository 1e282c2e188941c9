package provisioning_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/controllers/headroom"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

// Warm headroom on the full plane, through the stand-in autoscaler's
// CapacityBuffers as cluster-autoscaler serves them: a HeadroomPolicy
// keeps two 8-GPU replicas' room warm, one per rack, in node groups only
// the serving replicas tolerate; a burst of two replicas starts on it
// without waiting for a node, and the autoscaler restores the room in the
// same racks afterwards.
var _ = Describe("Warm headroom", func() {
	It("lands a burst of replicas on headroom at once and restores it in the same racks", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, nil)
		headroomTaint := corev1.Taint{Key: berthv1.HeadroomLabel, Value: ns, Effect: corev1.TaintEffectNoSchedule}
		for _, rack := range []string{"r1", "r2"} {
			addPoolWith(ctx, ns, rack, 3, map[string]string{berthv1.HeadroomLabel: ns}, []corev1.Taint{headroomTaint})
		}
		d := builders.Deployment(ns, "chat", "team", 0, "8")
		d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: headroomTaint.Key, Operator: corev1.TolerationOpEqual,
			Value: headroomTaint.Value, Effect: headroomTaint.Effect}}
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, d)) })
		hp := &berthv1.HeadroomPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: berthv1.HeadroomPolicySpec{
			TargetRef:     berthv1.HeadroomTarget{Kind: "Deployment", Name: "chat"},
			Sizing:        berthv1.HeadroomSizing{Mode: berthv1.HeadroomFixed, Replicas: ptr.To[int32](2)},
			TopologyLevel: rackLabel}}
		Expect(env.Client.Create(ctx, hp)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, hp)) })

		By("the autoscaler keeps one replica's room warm in each rack")
		bufferNodes := func(g Gomega) map[string]int {
			var nodes corev1.NodeList
			g.Expect(env.Client.List(ctx, &nodes, client.MatchingLabels{berthv1.HeadroomLabel: ns})).To(Succeed())
			out := map[string]int{}
			for _, n := range nodes.Items {
				g.Expect(n.Annotations).To(HaveKey(autoscaler.BufferNodeAnnotation), "node %s was created for a CapacityBuffer", n.Name)
				out[n.Labels[rackLabel]]++
			}
			return out
		}
		available := func(g Gomega) int32 {
			var got berthv1.HeadroomPolicy
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hp), &got)).To(Succeed())
			return got.Status.AvailableReplicas
		}
		Eventually(bufferNodes, timeout, interval).Should(Equal(map[string]int{"r1": 1, "r2": 1}))
		Eventually(available, timeout, interval).Should(BeEquivalentTo(2))

		By("a burst of two replicas runs on the headroom nodes, without a node created for it")
		start := time.Now()
		Eventually(func(g Gomega) {
			var fresh appsv1.Deployment
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), &fresh)).To(Succeed())
			fresh.Spec.Replicas = ptr.To[int32](2)
			g.Expect(env.Client.Update(ctx, &fresh)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "chat"})).To(Succeed())
			running := 0
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning {
					continue
				}
				var node corev1.Node
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node)).To(Succeed())
				g.Expect(node.Labels).To(HaveKeyWithValue(berthv1.HeadroomLabel, ns), "replica %s runs on %s, not on headroom", p.Name, node.Name)
				running++
			}
			g.Expect(running).To(Equal(2))
		}, timeout, interval).Should(Succeed())
		AddReportEntry("scale-up to both replicas Running on headroom", time.Since(start).Round(100*time.Millisecond).String())

		By("the autoscaler restores the room in the same racks: a second node in each")
		Eventually(bufferNodes, timeout, interval).Should(Equal(map[string]int{"r1": 2, "r2": 2}))
		Eventually(available, timeout, interval).Should(BeEquivalentTo(2))
	})

	It("keeps it as placeholder pods where buffers are not used: a replica preempts one, and the autoscaler scales up for it again", func(ctx SpecContext) {
		By("berth keeping headroom as placeholders, the autoscaler scaling up for unschedulable pods as cluster-autoscaler does")
		Expect(env.StopBerth()).To(Succeed())
		placeholders := berthOptions()
		placeholders.Setup.Headroom = headroom.Options{Mechanism: headroom.MechanismPlaceholder}
		_, err := env.StartBerth(placeholders)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() error {
			if err := env.StopBerth(); err != nil {
				return err
			}
			_, err := env.StartBerth(berthOptions())
			return err
		})
		Expect(stopAutoscale()).To(Succeed())
		withPods := autoscalerOptions
		withPods.ScaleUpUnschedulablePods = true
		stopAutoscale, err = env.StartAutoscaler(ctx, withPods)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) error {
			if err := stopAutoscale(); err != nil {
				return err
			}
			var err error
			stopAutoscale, err = env.StartAutoscaler(ctx, autoscalerOptions)
			return err
		})
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "berth-system"}},
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: headroom.DefaultPriorityClass}, Value: -10,
				PreemptionPolicy: ptr.To(corev1.PreemptNever)},
		} {
			Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, obj))).To(Succeed())
		}

		ns := rackSetup(ctx, nil, nil)
		headroomTaint := corev1.Taint{Key: berthv1.HeadroomLabel, Value: ns, Effect: corev1.TaintEffectNoSchedule}
		addPoolWith(ctx, ns, "r1", 3, map[string]string{berthv1.HeadroomLabel: ns}, []corev1.Taint{headroomTaint})
		d := builders.Deployment(ns, "chat", "team", 0, "8")
		d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: headroomTaint.Key, Operator: corev1.TolerationOpEqual,
			Value: headroomTaint.Value, Effect: headroomTaint.Effect}}
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, d)) })
		hp := &berthv1.HeadroomPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: berthv1.HeadroomPolicySpec{
			TargetRef:     berthv1.HeadroomTarget{Kind: "Deployment", Name: "chat"},
			Sizing:        berthv1.HeadroomSizing{Mode: berthv1.HeadroomFixed, Replicas: ptr.To[int32](1)},
			TopologyLevel: rackLabel}}
		Expect(env.Client.Create(ctx, hp)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, hp)) })

		By("a placeholder runs on a headroom node the autoscaler created for it")
		placeholderNode := func(g Gomega) string {
			var pods corev1.PodList
			g.Expect(env.Client.List(ctx, &pods, client.InNamespace("berth-system"), client.HasLabels{berthv1.HeadroomPlaceholderLabel})).To(Succeed())
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
					return p.Spec.NodeName
				}
			}
			return ""
		}
		var first string
		Eventually(func(g Gomega) { first = placeholderNode(g); g.Expect(first).NotTo(BeEmpty()) }, timeout, interval).Should(Succeed())

		By("a replica preempts it and runs on its node at once")
		Eventually(func(g Gomega) {
			var fresh appsv1.Deployment
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), &fresh)).To(Succeed())
			fresh.Spec.Replicas = ptr.To[int32](1)
			g.Expect(env.Client.Update(ctx, &fresh)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) string {
			var pods corev1.PodList
			g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "chat"})).To(Succeed())
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					return p.Spec.NodeName
				}
			}
			return ""
		}, timeout, interval).Should(Equal(first), func() string {
			return framework.DescribePods(ctx, env.Client, ns, "berth-system") + framework.DescribeNodes(ctx, env.Client)
		})

		By("the preempted placeholder is pending, and the autoscaler scales up a new node for it in the same rack")
		Eventually(func(g Gomega) {
			node := placeholderNode(g)
			g.Expect(node).NotTo(BeEmpty())
			g.Expect(node).NotTo(Equal(first))
			var n corev1.Node
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: node}, &n)).To(Succeed())
			g.Expect(n.Labels).To(HaveKeyWithValue(rackLabel, "r1"))
			// One node per scale-up, as cluster-autoscaler decides on one
			// snapshot: a pod bound since it was listed as unschedulable,
			// or a node still under its not-ready taint, asks for none.
			var nodes corev1.NodeList
			g.Expect(env.Client.List(ctx, &nodes, client.MatchingLabels{berthv1.HeadroomLabel: ns})).To(Succeed())
			g.Expect(nodes.Items).To(HaveLen(2), "the placeholder's first node and the one created for it after the preemption")
		}, timeout, interval).Should(Succeed())
	})
})
