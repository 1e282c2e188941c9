package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs/pods"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

// recordsNamespace is a namespace whose serving queue has 4 GPUs and may
// borrow 4 more from its training queue, which reclaims them.
func recordsNamespace(ctx context.Context) string {
	ns := servingNamespace(ctx) // its own queue "team" is not used here
	serving := builders.ClusterQueue(ns+"-serving").Cohort(ns).Quota(ns, builders.GPU, "4", "4").Obj()
	training := builders.ClusterQueue(ns+"-training").Cohort(ns).Quota(ns, builders.GPU, "4", "0").Obj()
	training.Spec.Preemption = berthv1.ClusterQueuePreemption{ReclaimWithinCohort: berthv1.PreemptAny}
	for _, cq := range []*berthv1.ClusterQueue{serving, training} {
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, cq)) })
	}
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "serving", serving.Name))).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "training", training.Name))).To(Succeed())
	return ns
}

// runningOnRecords checks that n replicas of Deployment name run, bound,
// each on a record of its own and none on a Workload.
func runningOnRecords(ctx context.Context, g Gomega, ns, name string, n int) replicas {
	r := replicasOf(ctx, g, ns, name)
	g.Expect(r.released).To(HaveLen(n))
	for _, p := range r.released {
		g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
		rec, has, err := lifecycle.RecordOf(&p)
		g.Expect(has).To(BeTrue(), "replica %s carries its record", p.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rec.Admission.ClusterQueue).To(Equal(ns + "-serving"))
	}
	return r
}

// ready reports whether the pod's Ready condition is true.
func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// replicaWrites leaves out of a namespace's writes those of its
// LocalQueues' status: counts and usage, written at most every few
// seconds whatever the replicas cost.
func replicaWrites(w map[string]int) map[string]int {
	for k := range w {
		if strings.Contains(k, "localqueues/status") {
			delete(w, k)
		}
	}
	return w
}

var _ = Describe("Replicas recorded on their pods", func() {
	It("admits the replicas that fit with one write each, counts them from their pods after a restart, and evicts a borrowed one by deleting its pod", func(ctx SpecContext) {
		ns := recordsNamespace(ctx)
		d := builders.Deployment(ns, "api", "serving", 2, "1")
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) { runningOnRecords(ctx, g, ns, "api", 2) }, timeout, interval).Should(Succeed())

		By("scaling from 2 to 8: six replicas, four of them on borrowed quota, for one pod patch each")
		first := map[string]bool{}
		for _, p := range replicasOf(ctx, Default, ns, "api").released {
			first[p.Name] = true
		}
		before := berthWrites.SnapshotIn(ns)
		scaled := time.Now()
		scale(ctx, d, 8)
		var r replicas
		Eventually(func(g Gomega) {
			r = runningOnRecords(ctx, g, ns, "api", 8)
			for _, p := range r.released {
				g.Expect(ready(&p)).To(BeTrue(), "replica %s is Ready", p.Name)
			}
		}, timeout, interval).Should(Succeed())
		added := map[string][]corev1.Pod{}
		for _, p := range r.released {
			if !first[p.Name] {
				added[p.Name] = []corev1.Pod{p}
			}
		}
		AddReportEntry("Deployment 2 to 8 on records: added replicas", jobsuite.StartTimes(scaled, 3*time.Minute, added))
		AddReportEntry("Deployment 2 to 8 on records: berth's writes in the namespace", fmt.Sprint(berthWrites.SinceIn(ns, before)))
		Expect(replicaWrites(berthWrites.SinceIn(ns, before))).To(Equal(map[string]int{"PATCH pods": 6}),
			"one write per replica: its release, carrying its record; no Workload, no status, no event")
		Expect(workloadsOfKind(ctx, Default, ns, pods.DeploymentKind)).To(BeEmpty())

		By("restarting berth: the replicas' quota is counted from their pods")
		Expect(env.StopBerth()).To(Succeed())
		berth, err := env.StartBerth(berthOptions)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			st, ok := berth.Scheduler.ClusterQueueStatus(ns + "-serving")
			g.Expect(ok).To(BeTrue())
			g.Expect(st.AdmittedWorkloads).To(BeEquivalentTo(8))
			g.Expect(st.FlavorsUsage[0].Resources[0].Total.String()).To(Equal("8"))
		}, timeout, interval).Should(Succeed())

		By("a training job of 4 GPUs reclaims its lent quota: four borrowed replicas are evicted by deleting their pods")
		before = berthWrites.SnapshotIn(ns)
		job := builders.Job(ns, "train", "training").Request(builders.GPU, "4").PodAnnotations(controlplane.RunFor(time.Hour)).Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(ptr.Deref(getJob(ctx, g, job).Spec.Suspend, true)).To(BeFalse())
			r := runningOnRecords(ctx, g, ns, "api", 4)
			g.Expect(r.gated).To(HaveLen(4), "the Deployment's replacements wait, gated")
		}, 2*timeout, interval).Should(Succeed())
		Expect(berthWrites.SinceIn(ns, before)).To(HaveKeyWithValue("DELETE pods", 4))
		Consistently(func(g Gomega) {
			g.Expect(replicasOf(ctx, g, ns, "api").released).To(HaveLen(4))
			for _, p := range replicasOf(ctx, g, ns, "api").gated {
				g.Expect(p.Annotations).NotTo(HaveKey(berthv1.AdmissionRecordAnnotation))
			}
		}, "3s", interval).Should(Succeed())
	})
})
