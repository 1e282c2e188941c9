package kinds_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
		Eventually(stillGated(ctx, lone), timeout, interval).Should(BeFalse())
	})

	It("reports a group that has fewer pods than its count, and admits it once the rest exist", func(ctx SpecContext) {
		ps := groupPods(ns, "partial", "team", "2", "2")
		Expect(env.Client.Create(ctx, ps[0])).To(Succeed())
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, ps[0].Name), timeout, interval).Should(ContainElement(And(
			ContainSubstring("GroupIncomplete"), ContainSubstring("has 1 of its 2 pods"))))
		Consistently(stillGated(ctx, ps[0]), "2s", interval).Should(BeTrue())
		Expect(env.Client.Create(ctx, ps[1])).To(Succeed())
		Eventually(released(ctx, ps...), timeout, interval).Should(BeTrue())
	})

	It("evicts a running group whose replacement pod asks for more GPUs, and admits it whole at the new size", func(ctx SpecContext) {
		ps := groupPods(ns, "grow", "team", "2", "2")
		for _, p := range ps {
			p.Spec.Containers[0].Resources.Requests[builders.GPU] = resource.MustParse("2")
			p.Spec.Containers[0].Resources.Limits[builders.GPU] = resource.MustParse("2")
			Expect(env.Client.Create(ctx, p)).To(Succeed())
		}
		Eventually(released(ctx, ps...), timeout, interval).Should(BeTrue())

		By("replacing a member with a pod of 4 GPUs: the group now needs 8 of the queue's 8")
		Expect(env.Client.Delete(ctx, ps[1])).To(Succeed())
		bigger := groupPods(ns, "grow", "team", "2", "2")
		for _, p := range bigger {
			p.Name += "-b"
		}
		Expect(env.Client.Create(ctx, bigger[1])).To(Succeed())
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, ps[0].Name), timeout, interval).Should(ContainElement(And(
			HavePrefix("Resized:"), ContainSubstring("4 nvidia.com/gpu per pod, admitted for 2"))))
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(ps[0]), &corev1.Pod{}))
		}, timeout, interval).Should(BeTrue(), "the member of the old size is stopped")
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, bigger[1].Name), timeout, interval).Should(ContainElement(
			HavePrefix("Dequeued:")), "a group of one of its two pods cannot be queued: its Workload goes")
		Consistently(stillGated(ctx, bigger[1]), "1s", interval).Should(BeTrue(), "the larger pod never runs on the admission for 2 GPUs a pod")

		By("completing the group at the new size: it is admitted whole for 4 GPUs a pod")
		Expect(env.Client.Create(ctx, bigger[0])).To(Succeed())
		Eventually(released(ctx, bigger...), timeout, interval).Should(BeTrue())
		wls := &berthv1.WorkloadList{}
		Expect(env.Client.List(ctx, wls, client.InNamespace(ns), client.MatchingLabels{berthv1.JobKeyLabel: "grow"})).To(Succeed())
		Expect(wls.Items).To(HaveLen(1))
		Expect(wls.Items[0].Spec.PodSets[0].Requests.Name(builders.GPU, "").String()).To(Equal("4"))
		Expect(meta.IsStatusConditionTrue(wls.Items[0].Status.Conditions, berthv1.ConditionAdmitted)).To(BeTrue())
	})
	It("keeps the pods a tenant adds to an admitted group gated: no more run than were admitted", func(ctx SpecContext) {
		tenant, err := env.Tenant(ctx, ns, "tenant", "edit")
		Expect(err).NotTo(HaveOccurred())
		ps := groupPods(ns, "capped", "team", "2", "2")
		for _, p := range ps {
			Expect(tenant.Create(ctx, p)).To(Succeed())
		}
		Eventually(released(ctx, ps...), timeout, interval).Should(BeTrue())

		By("adding three members of 4 GPUs each to the running group of two")
		extras := groupPods(ns, "capped", "team", "2", "2", "2")
		for _, p := range extras {
			p.Name += "-extra"
			Expect(tenant.Create(ctx, p)).To(Succeed())
		}
		// A warning on each extra pod itself, each with its own note.
		for _, p := range extras {
			Eventually(jobsuite.EventReasons(ctx, env.Client, ns, p.Name), timeout, interval).Should(ContainElement(And(
				HavePrefix("PodHeld: pod "+p.Name), ContainSubstring("delete the extra pods"))), p.Name)
		}
		Consistently(func(g Gomega) {
			for _, p := range extras {
				g.Expect(stillGated(ctx, p)(g)).To(BeTrue(), "extra pod %s", p.Name)
			}
		}, "2s", interval).Should(Succeed())

		By("taking a running member out of the count, by removing or changing the labels berth counts it by, as the tenant")
		member := &corev1.Pod{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ps[0]), member)).To(Succeed())
		for _, key := range []string{berthv1.WorkloadLabel, berthv1.PodSetLabel} {
			for _, value := range []*string{nil, ptr.To("other")} {
				p := &corev1.Pod{}
				Expect(tenant.Get(ctx, client.ObjectKeyFromObject(ps[0]), p)).To(Succeed())
				if value == nil {
					delete(p.Labels, key)
				} else {
					p.Labels[key] = *value
				}
				err := tenant.Update(ctx, p)
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "label %s set to %v: got %v", key, value, err)
				Expect(err.Error()).To(ContainSubstring("metadata.labels[" + key + "]: Forbidden: berth sets it when it releases the pod"))
			}
		}

		By("copying a member's berth labels onto an extra and removing its gate as the tenant")
		extra := &corev1.Pod{}
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(extras[0]), extra)).To(Succeed())
		extra.Labels[berthv1.WorkloadLabel] = member.Labels[berthv1.WorkloadLabel]
		extra.Labels[berthv1.PodSetLabel] = member.Labels[berthv1.PodSetLabel]
		extra.Spec.SchedulingGates = nil
		err = tenant.Update(ctx, extra)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("run where it was admitted"), "misshapen: not on the admission's nodes")
		By("and with the member's node selector too, shaped like the members")
		extra.Spec.NodeSelector = member.Spec.NodeSelector
		err = tenant.Update(ctx, extra)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("already runs the 2 pods it was admitted for"))
		Expect(stillGated(ctx, extras[0])(Default)).To(BeTrue())

		By("the Workload says which pods stay gated, and stops saying so once they are gone")
		held := func(g Gomega) *metav1.Condition {
			wls := &berthv1.WorkloadList{}
			g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns), client.MatchingLabels{berthv1.JobKeyLabel: "capped"})).To(Succeed())
			g.Expect(wls.Items).To(HaveLen(1))
			return meta.FindStatusCondition(wls.Items[0].Status.Conditions, berthv1.ConditionPodsHeld)
		}
		Eventually(func(g Gomega) {
			c := held(g)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(string(berthv1.ReasonPodsHeld)))
			g.Expect(c.Message).To(HavePrefix("3 pod(s) stay gated:"))
			for _, p := range extras {
				g.Expect(c.Message).To(ContainSubstring(p.Name))
			}
		}, timeout, interval).Should(Succeed())
		for _, p := range extras {
			Expect(tenant.Delete(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) { g.Expect(held(g)).To(BeNil()) }, timeout, interval).Should(Succeed())
	})

	It("stops a running group whose members come to disagree on its count, rather than release more on its admission", func(ctx SpecContext) {
		ps := groupPods(ns, "split", "team", "2", "2")
		for _, p := range ps {
			Expect(env.Client.Create(ctx, p)).To(Succeed())
		}
		Eventually(released(ctx, ps...), timeout, interval).Should(BeTrue())
		p := &corev1.Pod{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ps[1]), p)).To(Succeed())
		p.Annotations[berthv1.PodGroupTotalCountAnnotation] = "3"
		Expect(env.Client.Update(ctx, p)).To(Succeed())
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, ps[0].Name), timeout, interval).Should(ContainElement(And(
			HavePrefix("InvalidJob:"), ContainSubstring("disagree"))))
		for _, p := range ps {
			Eventually(func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))
			}, timeout, interval).Should(BeTrue(), "running member %s is stopped", p.Name)
		}
	})

	It("dequeues a queued group that lost a member, and never starts the rest of it", func(ctx SpecContext) {
		blocker := groupPods(ns, "blocker", "team", "2", "2")
		for _, p := range blocker {
			Expect(env.Client.Create(ctx, p)).To(Succeed())
		}
		Eventually(released(ctx, blocker...), timeout, interval).Should(BeTrue())
		waiting := groupPods(ns, "waiting", "team", "2", "2")
		for _, p := range waiting {
			Expect(env.Client.Create(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) []berthv1.Workload {
			wls := &berthv1.WorkloadList{}
			g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns), client.MatchingLabels{berthv1.JobKeyLabel: "waiting"})).To(Succeed())
			return wls.Items
		}, timeout, interval).Should(HaveLen(1), "the group is queued")

		By("deleting a member of the queued group, then freeing the quota it waited for")
		Expect(env.Client.Delete(ctx, waiting[1])).To(Succeed())
		Eventually(jobsuite.EventReasons(ctx, env.Client, ns, waiting[0].Name), timeout, interval).Should(ContainElement(And(
			HavePrefix("Dequeued:"), ContainSubstring("queued again once it can be"))))
		Eventually(func(g Gomega) []berthv1.Workload {
			wls := &berthv1.WorkloadList{}
			g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns), client.MatchingLabels{berthv1.JobKeyLabel: "waiting"})).To(Succeed())
			return wls.Items
		}, timeout, interval).Should(BeEmpty())
		for _, p := range blocker {
			Expect(env.Client.Delete(ctx, p)).To(Succeed())
		}
		Consistently(stillGated(ctx, waiting[0]), "2s", interval).Should(BeTrue(), "half a group never starts")

		By("recreating the member: the whole group is queued and starts")
		again := groupPods(ns, "waiting", "team", "2", "2")
		Expect(env.Client.Create(ctx, again[1])).To(Succeed())
		Eventually(released(ctx, waiting[0], again[1]), timeout, interval).Should(BeTrue())
	})
})

// stillGated reports whether the pod exists and still waits for berth.
func stillGated(ctx context.Context, pod *corev1.Pod) func(Gomega) bool {
	return func(g Gomega) bool {
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), p)).To(Succeed())
		return gated(p)
	}
}

// released reports whether every one of the pods exists and was released.
func released(ctx context.Context, ps ...*corev1.Pod) func(Gomega) bool {
	return func(g Gomega) bool {
		for _, pod := range ps {
			if stillGated(ctx, pod)(g) {
				return false
			}
		}
		return true
	}
}
