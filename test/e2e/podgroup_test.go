package e2e_test

import (
	"slices"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// groupOf builds the two pods of a pod group, 4 GPUs each.
func groupOf(ns, name string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range 2 {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: name + "-" + strconv.Itoa(i),
				Labels:      map[string]string{berthv1.QueueNameLabel: "team", berthv1.PodGroupLabel: name},
				Annotations: map[string]string{berthv1.PodGroupTotalCountAnnotation: "2"},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "eval", Image: "registry.invalid/eval:latest",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{builders.GPU: resource.MustParse("4")},
					Limits:   corev1.ResourceList{builders.GPU: resource.MustParse("4")},
				}}}},
		})
	}
	return out
}

// groupState reads how many of the group's pods are gated and bound.
func groupState(ctx SpecContext, g Gomega, ns, name string) (gated, bound int) {
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{berthv1.PodGroupLabel: name})).To(Succeed())
	for _, p := range pods.Items {
		if slices.ContainsFunc(p.Spec.SchedulingGates, func(sg corev1.PodSchedulingGate) bool { return sg.Name == berthv1.AdmissionGate }) {
			gated++
		}
		if p.Spec.NodeName != "" {
			g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(productLabel, product))
			bound++
		}
	}
	return gated, bound
}

var _ = Describe("pod groups on a real cluster", func() {
	It("schedules a group's pods together once admitted, holds the next group, and admits it when the first is deleted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.Flavor(ns, map[string]string{productLabel: product}))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, "8", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
		for _, p := range groupOf(ns, "first") {
			Expect(env.Client.Create(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			gated, bound := groupState(ctx, g, ns, "first")
			g.Expect(gated).To(BeZero())
			g.Expect(bound).To(Equal(2))
		}, timeout, interval).Should(Succeed())
		// Created only now: created together, either group's Workload may
		// reach the queue first and be admitted.
		for _, p := range groupOf(ns, "second") {
			Expect(env.Client.Create(ctx, p)).To(Succeed())
		}
		Consistently(func(g Gomega) {
			gated, bound := groupState(ctx, g, ns, "second")
			g.Expect(gated).To(Equal(2))
			g.Expect(bound).To(BeZero())
		}, "3s", interval).Should(Succeed())

		Expect(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{berthv1.PodGroupLabel: "first"})).To(Succeed())
		Eventually(func(g Gomega) {
			gated, bound := groupState(ctx, g, ns, "second")
			g.Expect(gated).To(BeZero())
			g.Expect(bound).To(Equal(2))
		}, timeout, interval).Should(Succeed())
	})
})
