package bypass_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs/pods"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
)

// apiPods lists the pods of the specs' Deployment "api" (labelled app: api)
// in ns.
func apiPods(ctx context.Context, g Gomega, ns string) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": "api"})).To(Succeed())
	return list.Items
}

// expectAPIRunning waits until n pods of Deployment "api" are bound.
func expectAPIRunning(ctx context.Context, ns string, n int) {
	Eventually(func(g Gomega) {
		running := 0
		for _, p := range apiPods(ctx, g, ns) {
			if p.Spec.NodeName != "" {
				running++
			}
		}
		g.Expect(running).To(Equal(n))
	}, timeout, interval).Should(Succeed())
}

var _ = Describe("a tenant with the edit role and a queued Deployment", func() {
	It("gets no pod released from a ReplicaSet of its own that copies the Deployment's pod labels", func(ctx SpecContext) {
		ns := newTeam(ctx, "2")
		mallory := editor(ctx, ns)
		d := builders.Deployment(ns, "api", queue, 2, "1")
		Expect(mallory.Create(ctx, d)).To(Succeed())
		expectAPIRunning(ctx, ns, 2)

		By("creating a ReplicaSet whose pod template copies the Deployment's, queue label included")
		fresh := &appsv1.Deployment{}
		Expect(mallory.Get(ctx, client.ObjectKeyFromObject(d), fresh)).To(Succeed())
		template := fresh.Spec.Template.DeepCopy()
		Expect(template.Labels).To(HaveKeyWithValue(berthv1.QueueNameLabel, queue), "berth copied the queue label into the template")
		template.Labels["copy"] = "true"
		rs := &appsv1.ReplicaSet{
			// Labelled apart from the Deployment's selector, so that the
			// Deployment controller does not adopt it.
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copy", Labels: map[string]string{"copy": "true"}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "true"}}, Template: *template},
		}
		Expect(mallory.Create(ctx, rs)).To(Succeed())
		// kube-controller-manager creates the ReplicaSet's pods gated, without
		// a round trip to berth (docs/admission-path.md); berth, following
		// each pod's controllers by UID, does not take them for the
		// Deployment's replicas and says so on each.
		Eventually(func(g Gomega) {
			list := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"copy": "true"})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(3))
			for _, p := range list.Items {
				g.Expect(p.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: berthv1.AdmissionGate}), "pod %s", p.Name)
				g.Expect(events(ctx, g, ns, p.Name)).To(ContainElement(And(HavePrefix("InvalidJob:"),
					ContainSubstring(`its ReplicaSet "copy" is not controlled by a Deployment`))), "pod %s", p.Name)
			}
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			list := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"copy": "true"})).To(Succeed())
			for _, p := range list.Items {
				g.Expect(p.Spec.NodeName).To(BeEmpty(), "pod %s of the tenant's ReplicaSet is not bound", p.Name)
			}
		}, quiet, interval).Should(Succeed())

		By("creating a pod that names the Deployment's own ReplicaSet as its controller: only kube-controller-manager may")
		// Such a pod made by kube-controller-manager skips the webhook at
		// creation; the condition that lets it reads the requester, so the
		// tenant's reaches berth and is refused.
		replicas := &appsv1.ReplicaSetList{}
		Expect(mallory.List(ctx, replicas, client.InNamespace(ns))).To(Succeed())
		var own *appsv1.ReplicaSet
		for i := range replicas.Items {
			if ref := metav1.GetControllerOf(&replicas.Items[i]); ref != nil && ref.UID == fresh.UID {
				own = &replicas.Items[i]
			}
		}
		Expect(own).NotTo(BeNil(), "the Deployment's ReplicaSet")
		forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Labels: fresh.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: own.Name, UID: own.UID, Controller: ptr.To(true)}}},
			Spec: *fresh.Spec.Template.Spec.DeepCopy()}
		Expect(mallory.Create(ctx, forged)).To(MatchError(ContainSubstring(
			fmt.Sprintf(`a queued pod that names controller ReplicaSet %q must be created by that controller`, own.Name))))
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("runs no replica beyond quota by deleting its Deployment with orphan propagation and scaling or adopting the ReplicaSet left", func(ctx SpecContext) {
		ns := newTeam(ctx, "2")
		mallory := editor(ctx, ns)
		d := builders.Deployment(ns, "api", queue, 2, "1")
		Expect(mallory.Create(ctx, d)).To(Succeed())
		expectAPIRunning(ctx, ns, 2)

		By("orphaning the ReplicaSet: its two replicas run on, charged to the quota")
		Expect(mallory.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		var rs *appsv1.ReplicaSet
		Eventually(func(g Gomega) {
			list := &appsv1.ReplicaSetList{}
			g.Expect(mallory.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1))
			g.Expect(metav1.GetControllerOf(&list.Items[0])).To(BeNil())
			rs = list.Items[0].DeepCopy()
		}, timeout, interval).Should(Succeed())

		By("scaling the orphaned ReplicaSet to 4: its new pods stay gated, each told why")
		Expect(update(ctx, mallory, rs, func(r *appsv1.ReplicaSet) { r.Spec.Replicas = ptr.To[int32](4) })).To(Succeed())
		Eventually(func(g Gomega) {
			var gated []corev1.Pod
			for _, p := range apiPods(ctx, g, ns) {
				if pods.IsGated(&p) {
					gated = append(gated, p)
				}
			}
			g.Expect(gated).To(HaveLen(2))
			for _, p := range gated {
				g.Expect(events(ctx, g, ns, p.Name)).To(ContainElement(And(HavePrefix("InvalidJob:"),
					ContainSubstring("is not controlled by a Deployment"))), "pod %s", p.Name)
			}
		}, timeout, interval).Should(Succeed())
		expectNoPodOutsideQuota(ctx, ns)

		By("adopting it by a queued Deployment of 4: the two added replicas wait for the quota the two running ones hold")
		Expect(mallory.Create(ctx, builders.Deployment(ns, "api", queue, 4, "1"))).To(Succeed())
		Eventually(func(g Gomega) {
			gated := 0
			for _, p := range apiPods(ctx, g, ns) {
				if pods.IsGated(&p) {
					gated++
				}
			}
			g.Expect(gated).To(Equal(2))
		}, timeout, interval).Should(Succeed())
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("cannot remove the gate of a queued Deployment's pod", func(ctx SpecContext) {
		ns := newTeam(ctx, "1")
		mallory := editor(ctx, ns)
		Expect(mallory.Create(ctx, builders.Deployment(ns, "api", queue, 2, "1"))).To(Succeed())
		var gated *corev1.Pod
		Eventually(func(g Gomega) {
			gated = nil
			running := 0
			for _, p := range apiPods(ctx, g, ns) {
				switch {
				case p.Spec.NodeName != "":
					running++
				case pods.IsGated(&p):
					gated = p.DeepCopy()
				}
			}
			g.Expect(running).To(Equal(1))
			g.Expect(gated).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())

		Expect(update(ctx, mallory, gated, func(p *corev1.Pod) { p.Spec.SchedulingGates = nil })).
			To(MatchError(ContainSubstring("the berth.dev/admission gate is removed by berth when the pod's gang is admitted, not before")))
		expectNoPodOutsideQuota(ctx, ns)
	})

	It("cannot copy, change or remove the record a replica runs on, nor the label that makes it trusted", func(ctx SpecContext) {
		ns := newTeam(ctx, "1")
		mallory := editor(ctx, ns)
		Expect(mallory.Create(ctx, builders.Deployment(ns, "api", queue, 2, "1"))).To(Succeed())
		var running, gated *corev1.Pod
		Eventually(func(g Gomega) {
			running, gated = nil, nil
			for _, p := range apiPods(ctx, g, ns) {
				switch {
				case p.Spec.NodeName != "":
					running = p.DeepCopy()
				case pods.IsGated(&p):
					gated = p.DeepCopy()
				}
			}
			g.Expect(running).NotTo(BeNil())
			g.Expect(gated).NotTo(BeNil())
			_, has, err := lifecycle.RecordOf(running)
			g.Expect(has && err == nil).To(BeTrue(), "the running replica carries its record (%v)", err)
		}, timeout, interval).Should(Succeed())
		record := running.Annotations[berthv1.AdmissionRecordAnnotation]

		By("removing the record, or rewriting it to charge nothing, so that a restarted berth would count less")
		refused := ContainSubstring("metadata.annotations[berth.dev/admission-record]: Forbidden")
		Expect(update(ctx, mallory, running.DeepCopy(), func(p *corev1.Pod) { delete(p.Annotations, berthv1.AdmissionRecordAnnotation) })).To(MatchError(refused))
		rec, _, err := lifecycle.RecordOf(running)
		Expect(err).NotTo(HaveOccurred())
		rec.Spec.PodSets[0].Requests = corev1.ResourceList{}
		free, err := lifecycle.EncodeRecord(*rec)
		Expect(err).NotTo(HaveOccurred())
		Expect(update(ctx, mallory, running.DeepCopy(), func(p *corev1.Pod) {
			p.Annotations[berthv1.AdmissionRecordAnnotation] = free
		})).To(MatchError(refused))

		By("removing or changing the label that makes berth trust the record, so that a restarted berth would not count it")
		Expect(update(ctx, mallory, running.DeepCopy(), func(p *corev1.Pod) { delete(p.Labels, berthv1.WorkloadLabel) })).To(
			MatchError(ContainSubstring("metadata.labels[berth.dev/workload]: Forbidden: berth sets it when it releases the pod")))
		Expect(update(ctx, mallory, running.DeepCopy(), func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "other" })).To(
			MatchError(ContainSubstring("metadata.labels[berth.dev/workload]: Forbidden")))

		By("copying it onto the waiting replica, or onto a pod of its own")
		Expect(update(ctx, mallory, gated.DeepCopy(), func(p *corev1.Pod) {
			p.Annotations = map[string]string{berthv1.AdmissionRecordAnnotation: record}
		})).To(MatchError(refused))
		own := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own",
			Annotations: map[string]string{berthv1.AdmissionRecordAnnotation: record}},
			Spec: *gated.Spec.DeepCopy()}
		own.Spec.NodeName, own.Spec.SchedulingGates = "", nil
		Expect(mallory.Create(ctx, own)).To(MatchError(refused))

		fresh := &corev1.Pod{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(running), fresh)).To(Succeed())
		Expect(fresh.Annotations).To(HaveKeyWithValue(berthv1.AdmissionRecordAnnotation, record))
		expectNoPodOutsideQuota(ctx, ns)
	})
})

var _ = Describe("a tenant with the edit role and a running replica", func() {
	It("runs no second replica on one replica's quota by making its ReplicaSet let the running pod go", func(ctx SpecContext) {
		ns := newTeam(ctx, "1")
		mallory := editor(ctx, ns)
		Expect(mallory.Create(ctx, builders.Deployment(ns, "api", queue, 1, "1"))).To(Succeed())
		expectAPIRunning(ctx, ns, 1)
		var first *corev1.Pod
		Eventually(func(g Gomega) {
			ps := apiPods(ctx, g, ns)
			g.Expect(ps).To(HaveLen(1))
			first = ps[0].DeepCopy()
			_, has, err := lifecycle.RecordOf(first)
			g.Expect(has && err == nil).To(BeTrue(), "the replica runs on its record (%v)", err)
		}, timeout, interval).Should(Succeed())

		By("holding the pod through its deletion, as a long grace period would, and changing its pod-template-hash label")
		const hold = "example.com/hold"
		Expect(update(ctx, mallory, first, func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, hold) })).To(Succeed())
		DeferCleanup(func(ctx SpecContext) error {
			return client.IgnoreNotFound(update(ctx, env.Client, first.DeepCopy(), func(p *corev1.Pod) { p.Finalizers = nil }))
		})
		Expect(update(ctx, mallory, first, func(p *corev1.Pod) { p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "let-go" })).To(Succeed())
		Eventually(func(g Gomega) {
			var replacement bool
			for _, p := range apiPods(ctx, g, ns) {
				replacement = replacement || p.UID != first.UID
			}
			g.Expect(replacement).To(BeTrue(), "the ReplicaSet let the pod go and created a replacement")
		}, timeout, interval).Should(Succeed())

		By("the replacement waits while the pod let go still runs on its record, also once it is being deleted")
		stillHeld := func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.Spec.NodeName).NotTo(BeEmpty())
			for _, p := range apiPods(ctx, g, ns) {
				if p.UID != first.UID {
					g.Expect(p.Spec.NodeName).To(BeEmpty(), "replacement %s is not bound beside the pod let go", p.Name)
				}
			}
		}
		Consistently(stillHeld, quiet, interval).Should(Succeed())
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, first.DeepCopy()))).To(Succeed())
		Consistently(stillHeld, quiet, interval).Should(Succeed())

		By("once that pod is gone, its quota comes back and the replacement runs")
		Expect(update(ctx, env.Client, first.DeepCopy(), func(p *corev1.Pod) { p.Finalizers = nil })).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(first), &corev1.Pod{}))
		}, timeout, interval).Should(BeTrue())
		expectAPIRunning(ctx, ns, 1)
		expectNoPodOutsideQuota(ctx, ns)
	})
})

var _ = Describe("a tenant with the edit role whose Deployment replica waits", func() {
	It("cannot relabel the waiting replica's pod with a PriorityClass its LocalQueue does not grant and start it so", func(ctx SpecContext) {
		ns := newTeam(ctx, "1")
		mallory := editor(ctx, ns)
		filler := builders.Job(ns, "filler", queue).Request(builders.GPU, "1").Obj()
		Expect(mallory.Create(ctx, filler)).To(Succeed())
		admittedUID(ctx, ns, string(filler.UID))

		By("a replica that waits for the queue's one GPU, offered without a Workload")
		Expect(mallory.Create(ctx, builders.Deployment(ns, "api", queue, 1, "1"))).To(Succeed())
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			list := apiPods(ctx, g, ns)
			g.Expect(list).To(HaveLen(1))
			g.Expect(pods.IsGated(&list[0])).To(BeTrue())
			pod = list[0]
		}, timeout, interval).Should(Succeed())

		By("labelling its pod with system-node-critical, then freeing the GPU")
		Expect(update(ctx, mallory, &pod, func(p *corev1.Pod) { p.Labels[berthv1.PriorityClassLabel] = "system-node-critical" })).To(Succeed())
		Expect(mallory.Delete(ctx, filler, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, ns, string(pod.UID))
			g.Expect(wl.Spec.PriorityClassName).To(Equal("system-node-critical"))
			g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", berthv1.ConditionQuotaReserved),
				HaveField("Reason", string(berthv1.ReasonPriorityClassNotAllowed)))))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			for _, p := range apiPods(ctx, g, ns) {
				g.Expect(p.Spec.NodeName).To(BeEmpty(), "the relabelled replica does not run")
				_, recorded, _ := lifecycle.RecordOf(&p)
				g.Expect(recorded).To(BeFalse(), "no record carries the refused priority")
			}
		}, quiet, interval).Should(Succeed())
		expectNoPodOutsideQuota(ctx, ns)
	})
})
