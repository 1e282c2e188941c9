package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

// servingQuota is the GPU quota of every serving spec's ClusterQueue: half
// the plane's two 8-GPU nodes, so quota, not capacity, bounds the replicas.
const servingQuota = "8"

// servingNamespace creates a namespace with a ClusterQueue of servingQuota
// GPUs and its LocalQueue "team". Its Deployments and StatefulSets are deleted
// before its pods when the spec ends, so nothing re-creates them.
func servingNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-e2e-serving-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		owners := []client.Object{&appsv1.Deployment{}, &appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &batchv1.Job{}}
		Expect(env.CleanNamespace(ctx, ns.Name, framework.CleanOptions{Owners: owners, Timeout: timeout})).To(Succeed())
	}, NodeTimeout(2*timeout))
	Expect(env.Client.Create(ctx, builders.Flavor(ns.Name, map[string]string{productLabel: product}))).To(Succeed())
	Expect(env.Client.Create(ctx, builders.ClusterQueue(ns.Name).Quota(ns.Name, builders.GPU, servingQuota, "").Obj())).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns.Name, "team", ns.Name))).To(Succeed())
	return ns.Name
}

// replicas counts the live pods labelled app: name: gated, and released
// (bound or about to be), skipping pods that are going away.
type replicas struct {
	gated, released []corev1.Pod
}

func replicasOf(ctx context.Context, g Gomega, ns, name string) replicas {
	list := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": name})).To(Succeed())
	var out replicas
	for _, p := range list.Items {
		switch {
		case !p.DeletionTimestamp.IsZero():
		case pods.IsGated(&p):
			out.gated = append(out.gated, p)
		default:
			g.Expect(p.Labels).To(HaveKey(berthv1.WorkloadLabel), "released pod %s runs on its admission", p.Name)
			out.released = append(out.released, p)
		}
	}
	return out
}

// scale sets spec.replicas, as kubectl scale or an HPA does.
func scale(ctx context.Context, obj client.Object, n int32) {
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	Expect(env.Client.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
}

// workloadsOfKind lists the namespace's Workloads of a serving kind.
func workloadsOfKind(ctx context.Context, g Gomega, ns, kind string) []berthv1.Workload {
	wls := &berthv1.WorkloadList{}
	g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
	return slices.DeleteFunc(wls.Items, func(wl berthv1.Workload) bool {
		return !strings.HasPrefix(wl.Name, strings.ToLower(kind)+"-")
	})
}

var _ = Describe("Deployments and StatefulSets, replica by replica", func() {
	It("runs the replicas of a Deployment scaled from 2 to 30 that quota allows, and keeps the rest gated in the queue, without a Workload, explained", func(ctx SpecContext) {
		ns := servingNamespace(ctx)
		d := builders.Deployment(ns, "api", "team", 2, "1")
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "api")
			g.Expect(r.released).To(HaveLen(2))
			for _, p := range r.released {
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(productLabel, product))
			}
		}, timeout, interval).Should(Succeed())

		scale(ctx, d, 30)
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "api")
			g.Expect(r.released).To(HaveLen(8))
			g.Expect(r.gated).To(HaveLen(22))
			g.Expect(workloadsOfKind(ctx, g, ns, pods.DeploymentKind)).To(BeEmpty(), "a waiting replica costs no write")
			for _, p := range r.gated {
				_, key, _ := pods.ServingKey(&p)
				name := jobs.KeyWorkloadName(pods.DeploymentKind, ns, key)
				// Queued under the name its Workload would have; why it waits
				// is served from the engine (kubectl berth explain, the
				// visibility API).
				e, ok := env.Berth().Scheduler.Explain(admission.WorkloadKey{Namespace: ns, Name: name})
				g.Expect(ok).To(BeTrue(), "workload %s is pending in the engine", name)
				g.Expect(e.Reason).To(Equal(admission.InsufficientQuota))
				g.Expect(e.Message).To(ContainSubstring("insufficient quota"))
			}
		}, 2*timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(replicasOf(ctx, g, ns, "api").released).To(HaveLen(8))
		}, "3s", interval).Should(Succeed())
	})

	It("runs replicas pinned to a GPU product on the flavor of that product, though an earlier flavor has room, and holds those no flavor has", func(ctx SpecContext) {
		ns := servingNamespace(ctx)
		// A flavor of another product, with room and no nodes, ahead of the
		// plane's: admitted there, a replica pinned to the plane's product
		// could never run.
		other := ns + "-a100"
		Expect(env.Client.Create(ctx, builders.Flavor(other, map[string]string{productLabel: "NVIDIA-A100"}))).To(Succeed())
		cq := &berthv1.ClusterQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
		group := &cq.Spec.ResourceGroups[0]
		group.Flavors = append([]berthv1.FlavorQuotas{{Name: other, Resources: group.Flavors[0].Resources}}, group.Flavors...)
		Expect(env.Client.Update(ctx, cq)).To(Succeed())
		tenant, err := env.Tenant(ctx, ns, "pinner", "edit")
		Expect(err).NotTo(HaveOccurred())
		pinned := func(name, value string) {
			d := builders.Deployment(ns, name, "team", 2, "1")
			d.Spec.Template.Spec.NodeSelector = map[string]string{productLabel: value}
			Expect(tenant.Create(ctx, d)).To(Succeed())
		}

		pinned("api", product)
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "api")
			g.Expect(r.released).To(HaveLen(2))
			for _, p := range r.released {
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
				g.Expect(p.Annotations[berthv1.AdmissionRecordAnnotation]).To(ContainSubstring(`"flavors":{"nvidia.com/gpu":"`+ns+`"}`), "admitted on the plane's flavor")
			}
		}, timeout, interval).Should(Succeed())

		pinned("nowhere", "NVIDIA-B200")
		Eventually(func(g Gomega) {
			wls := workloadsOfKind(ctx, g, ns, pods.DeploymentKind)
			g.Expect(wls).To(HaveLen(2), "a replica that needs someone to act is queued with a Workload")
			for _, wl := range wls {
				c := apimeta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(string(berthv1.ReasonNoMatchingFlavor)))
				g.Expect(c.Message).To(ContainSubstring(other + " (" + productLabel + "=NVIDIA-A100)"))
			}
			g.Expect(replicasOf(ctx, g, ns, "nowhere").gated).To(HaveLen(2))
		}, timeout, interval).Should(Succeed())
	})

	It("releases a Deployment's quota when it is scaled to zero, and the next job is admitted", func(ctx SpecContext) {
		ns := servingNamespace(ctx)
		d := builders.Deployment(ns, "api", "team", 8, "1")
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(replicasOf(ctx, g, ns, "api").released).To(HaveLen(8)) }, timeout, interval).Should(Succeed())
		job := builders.Job(ns, "train", "team").Pods(1).Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(ptr.Deref(getJob(ctx, g, job).Spec.Suspend, false)).To(BeTrue())
		}, "3s", interval).Should(Succeed())

		scale(ctx, d, 0)
		Eventually(func(g Gomega) {
			g.Expect(workloadsOfKind(ctx, g, ns, pods.DeploymentKind)).To(BeEmpty())
		}, timeout, interval).Should(Succeed(), "each replica's Workload goes with its pod")
		Eventually(complete(ctx, job), timeout, interval).Should(Succeed())
	})

	It("keeps a Deployment's running replicas and their quota when it is deleted with orphan propagation, and queues again under the Deployment that adopts them", func(ctx SpecContext) {
		ns := servingNamespace(ctx)
		d := builders.Deployment(ns, "api", "team", 4, "1")
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(replicasOf(ctx, g, ns, "api").released).To(HaveLen(4)) }, timeout, interval).Should(Succeed())
		job := builders.Job(ns, "train", "team").Pods(1).Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())

		By("deleting the Deployment with orphan propagation: its ReplicaSet and running replicas stay, on their quota")
		Expect(env.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		Eventually(func(g Gomega) {
			rss := &appsv1.ReplicaSetList{}
			g.Expect(env.Client.List(ctx, rss, client.InNamespace(ns))).To(Succeed())
			g.Expect(rss.Items).To(HaveLen(1))
			g.Expect(metav1.GetControllerOf(&rss.Items[0])).To(BeNil(), "orphaned by the garbage collector")
		}, timeout, interval).Should(Succeed())
		// Any change to a pod (a status update, an annotation) has berth read
		// its chain again, now broken.
		Eventually(func(g Gomega) {
			for _, p := range replicasOf(ctx, g, ns, "api").released {
				patch := []byte(`{"metadata":{"annotations":{"example.com/touched":"1"}}}`)
				g.Expect(env.Client.Patch(ctx, &p, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
			}
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "api")
			g.Expect(r.released).To(HaveLen(4), "running replicas are not evicted")
			for _, p := range r.released {
				_, has, err := lifecycle.RecordOf(&p)
				g.Expect(has && err == nil).To(BeTrue(), "replica %s still runs on its record (%v)", p.Name, err)
			}
			g.Expect(ptr.Deref(getJob(ctx, g, job).Spec.Suspend, false)).To(BeTrue(), "their quota stays charged")
		}, "3s", interval).Should(Succeed())

		By("a new Deployment adopts the ReplicaSet and scales it: the new replicas are queued and admitted")
		adopter := builders.Deployment(ns, "api", "team", 6, "1")
		Expect(env.Client.Create(ctx, adopter)).To(Succeed())
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "api")
			g.Expect(r.released).To(HaveLen(6))
			g.Expect(r.gated).To(BeEmpty())
		}, 2*timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(ptr.Deref(getJob(ctx, g, job).Spec.Suspend, false)).To(BeTrue())
		}, "2s", interval).Should(Succeed())
	})

	It("completes a rolling update of a Deployment at full quota (maxUnavailable 0, maxSurge 1) without exceeding it", func(ctx SpecContext) {
		ns := servingNamespace(ctx)
		d := builders.Deployment(ns, "api", "team", 8, "1")
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(replicasOf(ctx, g, ns, "api").released).To(HaveLen(8)) }, timeout, interval).Should(Succeed())

		patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"example.com/revision":"2"}}}}}`)
		Expect(env.Client.Patch(ctx, d, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(len(replicasOf(ctx, g, ns, "api").released)).To(BeNumerically("<=", 8), "berth never runs more than the quota")
			fresh := &appsv1.Deployment{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), fresh)).To(Succeed())
			g.Expect(fresh.Status.ObservedGeneration).To(Equal(fresh.Generation))
			g.Expect(fresh.Status.UpdatedReplicas).To(BeEquivalentTo(8))
			g.Expect(fresh.Status.Replicas).To(BeEquivalentTo(8))
			g.Expect(fresh.Status.AvailableReplicas).To(BeEquivalentTo(8))
		}, 4*timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) []string { return events(ctx, g, ns, d.Name) }, timeout, interval).
			Should(ContainElement(HavePrefix("Swapped:")))
		Eventually(func(g Gomega) {
			for _, p := range replicasOf(ctx, g, ns, "api").released {
				g.Expect(p.Annotations).To(HaveKeyWithValue("example.com/revision", "2"))
			}
		}, timeout, interval).Should(Succeed())
	})

	It("queues a StatefulSet ordinal by ordinal as it scales up and down", func(ctx SpecContext) {
		ns := servingNamespace(ctx)
		s := builders.StatefulSet(ns, "kv", "team", 1, "2", false)
		Expect(env.Client.Create(ctx, s)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(replicasOf(ctx, g, ns, "kv").released).To(HaveLen(1)) }, timeout, interval).Should(Succeed())

		By("scaling to 6 ordinals of 2 GPUs on 8: four run, the fifth waits gated (OrderedReady creates no sixth)")
		scale(ctx, s, 6)
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "kv")
			g.Expect(r.released).To(HaveLen(4))
			g.Expect(r.gated).To(HaveLen(1))
			g.Expect(r.gated[0].Name).To(Equal("kv-4"))
		}, 2*timeout, interval).Should(Succeed())

		By("scaling down to 1: the removed ordinals' quota, on their records or the waiting one's Workload, goes with their pods")
		scale(ctx, s, 1)
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "kv")
			g.Expect(r.released).To(HaveLen(1))
			g.Expect(r.gated).To(BeEmpty())
			g.Expect(workloadsOfKind(ctx, g, ns, pods.StatefulSetKind)).To(BeEmpty(), "kv-0 runs on its record, kv-4's Workload went")
			st, ok := env.Berth().Scheduler.ClusterQueueStatus(ns)
			g.Expect(ok).To(BeTrue())
			g.Expect(st.AdmittedWorkloads).To(BeEquivalentTo(1))
			g.Expect(st.FlavorsUsage[0].Resources[0].Total.String()).To(Equal("2"))
		}, 2*timeout, interval).Should(Succeed())
	})

	It("starts a whole-set StatefulSet together, queues it again whole when it grows past quota, and runs it again at a size that fits", func(ctx SpecContext) {
		ns := servingNamespace(ctx)
		s := builders.StatefulSet(ns, "shards", "team", 3, "2", true)
		Expect(env.Client.Create(ctx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "shards")
			g.Expect(r.released).To(HaveLen(3))
			g.Expect(workloadsOfKind(ctx, g, ns, pods.StatefulSetKind)).To(HaveLen(1), "one Workload for the whole set")
		}, timeout, interval).Should(Succeed())

		By("growing to 5 x 2 GPUs on 8: the whole set is held, none of it runs")
		scale(ctx, s, 5)
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "shards")
			g.Expect(r.released).To(BeEmpty())
			g.Expect(r.gated).To(HaveLen(5))
		}, 2*timeout, interval).Should(Succeed())

		By("shrinking to 4 x 2 GPUs: admitted whole again, and bound through the set's PodGroup again")
		scale(ctx, s, 4)
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "shards")
			g.Expect(r.released).To(HaveLen(4))
			g.Expect(r.gated).To(BeEmpty())
			for _, p := range r.released {
				g.Expect(p.Spec.SchedulingGroup).NotTo(BeNil(), "pod %s joined the set's group at creation", p.Name)
				g.Expect(p.Spec.SchedulingGroup.PodGroupName).To(HaveValue(Equal("statefulset-shards")))
			}
			pg := &schedulingv1beta1.PodGroup{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "statefulset-shards"}, pg)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)).To(BeTrue())
		}, 2*timeout, interval).Should(Succeed())

		By("shrinking to 2 keeps it running on the smaller admission")
		scale(ctx, s, 2)
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, ns, "shards")
			g.Expect(r.released).To(HaveLen(2))
			wls := workloadsOfKind(ctx, g, ns, pods.StatefulSetKind)
			g.Expect(wls).To(HaveLen(1))
			g.Expect(wls[0].Spec.PodSets[0].Count).To(BeEquivalentTo(2))
		}, 2*timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) []string { return events(ctx, g, ns, s.Name) }, timeout, interval).
			Should(ContainElement(HavePrefix("Resized:")))
	})
})
