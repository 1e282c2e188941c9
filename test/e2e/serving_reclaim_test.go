package e2e_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

// suspendedJobs counts the Jobs of ns that are suspended and those that run.
func suspendedJobs(ctx context.Context, g Gomega, ns string) (suspended, running int) {
	jobs := &batchv1.JobList{}
	g.Expect(env.Client.List(ctx, jobs, client.InNamespace(ns))).To(Succeed())
	for _, j := range jobs.Items {
		if ptr.Deref(j.Spec.Suspend, false) {
			suspended++
		} else {
			running++
		}
	}
	return suspended, running
}

var _ = Describe("serving takes back the quota it lends to training", func() {
	It("runs every replica of a Deployment scaled from 2 to 30 on quota training borrowed, preempting only as much training as needed", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-e2e-reclaim-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		pool := ns.Name
		DeferCleanup(func(ctx SpecContext) {
			owners := []client.Object{&appsv1.Deployment{}, &appsv1.ReplicaSet{}, &batchv1.Job{}}
			Expect(env.CleanNamespace(ctx, pool, framework.CleanOptions{Owners: owners, Timeout: timeout})).To(Succeed())
		}, NodeTimeout(2*timeout))

		By("three 16-GPU nodes of the spec's own product, a serving queue of 30 GPUs and a training queue of 4 that may borrow 30")
		for i := range 3 {
			name := fmt.Sprintf("%s-%d", pool, i)
			node := controlplane.GPUNode(name, 16, map[string]string{productLabel: pool})
			Expect(env.Client.Create(ctx, node)).To(Succeed())
			DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, node)) })
			Expect(controlplane.WaitForNodeReady(ctx, env.Client, name)).To(Succeed())
		}
		Expect(env.Client.Create(ctx, builders.Flavor(pool, map[string]string{productLabel: pool}))).To(Succeed())
		serving := builders.ClusterQueue(pool+"-serving").Cohort(pool).Quota(pool, builders.GPU, "30", "0").Obj()
		serving.Spec.Preemption = berthv1.ClusterQueuePreemption{ReclaimWithinCohort: berthv1.PreemptAny}
		training := builders.ClusterQueue(pool+"-training").Cohort(pool).Quota(pool, builders.GPU, "4", "30").Obj()
		for _, cq := range []*berthv1.ClusterQueue{serving, training} {
			Expect(env.Client.Create(ctx, cq)).To(Succeed())
			DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, cq)) })
		}
		Expect(env.Client.Create(ctx, builders.LocalQueue(pool, "serving", serving.Name))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(pool, "training", training.Name))).To(Succeed())

		By("two serving replicas of one GPU, and eight 4-GPU training jobs: seven of them on quota borrowed from serving")
		d := builders.Deployment(pool, "api", "serving", 2, "1")
		Expect(env.Client.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(replicasOf(ctx, g, pool, "api").released).To(HaveLen(2)) }, timeout, interval).Should(Succeed())
		for i := range 8 {
			// Running for an hour: a kwok Job pod otherwise ends within
			// seconds, and its freed quota would admit a victim again.
			job := builders.Job(pool, fmt.Sprintf("train-%d", i), "training").Request(builders.GPU, "4").
				PodAnnotations(controlplane.RunFor(time.Hour)).Obj()
			Expect(env.Client.Create(ctx, job)).To(Succeed())
		}
		Eventually(func(g Gomega) int {
			_, running := suspendedJobs(ctx, g, pool)
			return running
		}, timeout, interval).Should(Equal(8))

		By("scaling serving from 2 to 30 in one step")
		scaled := time.Now()
		scale(ctx, d, 30)
		var started []corev1.Pod
		Eventually(func(g Gomega) {
			r := replicasOf(ctx, g, pool, "api")
			g.Expect(r.gated).To(BeEmpty())
			g.Expect(r.released).To(HaveLen(30))
			for _, p := range r.released {
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
				g.Expect(ready(&p)).To(BeTrue(), "replica %s is Ready", p.Name)
			}
			started = r.released
		}, 2*timeout, interval).Should(Succeed())
		added := map[string][]corev1.Pod{}
		for _, p := range started {
			if !p.CreationTimestamp.Time.Before(scaled.Truncate(time.Second)) {
				added[p.Name] = []corev1.Pod{p}
			}
		}
		AddReportEntry("Deployment 2 to 30 on lent quota: added replicas", jobsuite.StartTimes(scaled, 3*time.Minute, added))

		By("exactly the seven borrowing jobs were preempted: the one within training's own quota runs on")
		Consistently(func(g Gomega) {
			suspended, running := suspendedJobs(ctx, g, pool)
			g.Expect(suspended).To(Equal(7))
			g.Expect(running).To(Equal(1))
		}, "3s", interval).Should(Succeed())
	})
})
