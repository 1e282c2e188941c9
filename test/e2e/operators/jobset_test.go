package operators_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

// trainingJobSet is a JobSet of a driver (one pod) and two workers (one
// pod each), 4, 2 and 2 GPUs: one 8-GPU gang whose pods run for d.
func trainingJobSet(ns, name string, d time.Duration) *jobsetv1.JobSet {
	rj := func(rjName string, replicas int32, gpus string) jobsetv1.ReplicatedJob {
		return jobsetv1.ReplicatedJob{Name: rjName, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: controlplane.RunFor(d)},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "main", Image: "registry.invalid/train:latest", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
						Limits:   corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
					}}}},
			},
		}}}
	}
	return &jobsetv1.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec:       jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{rj("driver", 1, "4"), rj("workers", 2, "2")}},
	}
}

func jobSetPods(ctx SpecContext, g Gomega, js *jobsetv1.JobSet) []corev1.Pod {
	return podsWith(ctx, g, js.Namespace, map[string]string{jobsetv1.JobSetNameKey: js.Name})
}

func jobSetCompleted(ctx SpecContext, js *jobsetv1.JobSet) func(Gomega) {
	return func(g Gomega) {
		fresh := &jobsetv1.JobSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(js), fresh)).To(Succeed())
		g.Expect(fresh.Status.TerminalState).To(Equal(string(jobsetv1.JobSetCompleted)))
	}
}

var _ = Describe("JobSets run by the JobSet operator", func() {
	It("runs two 8-GPU JobSets one after the other under quota for one, each whole on the flavor's nodes", func(ctx SpecContext) {
		ns := setup(ctx)
		first, second := trainingJobSet(ns, "first", 5*time.Second), trainingJobSet(ns, "second", time.Second)
		Expect(env.Client.Create(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := jobSetPods(ctx, g, first)
			g.Expect(pods).To(HaveLen(3), "the operator created every pod of the gang")
			for _, p := range pods {
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(productLabel, product))
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
			}
		}, timeout, interval).Should(Succeed())

		By("holding the second JobSet while the first runs: the operator creates none of its pods")
		Expect(env.Client.Create(ctx, second)).To(Succeed())
		Consistently(func(g Gomega) {
			fresh := &jobsetv1.JobSet{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(second), fresh)).To(Succeed())
			g.Expect(fresh.Spec.Suspend).To(HaveValue(BeTrue()))
			g.Expect(jobSetPods(ctx, g, second)).To(BeEmpty())
		}, held, interval).Should(Succeed())

		By("running the second once the first completes and releases its quota")
		Eventually(jobSetCompleted(ctx, first), timeout, interval).Should(Succeed())
		Eventually(jobSetCompleted(ctx, second), timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			wls := workloadsOf(ctx, g, first)
			g.Expect(wls).To(HaveLen(1))
			g.Expect(wls[0].Status.Conditions).To(ContainElement(And(
				HaveField("Type", berthv1.ConditionFinished), HaveField("Reason", string(berthv1.ReasonSucceeded)))))
		}, timeout, interval).Should(Succeed())
	})
})

// A JobSet v0.12 failure policy may restart one failed Job alone
// (RestartJob): the operator recreates that Job, under the same name and
// index, while the others run on.
var _ = Describe("a JobSet whose failure policy restarts one Job alone", func() {
	It("stays admitted on its quota and flavor while the operator recreates the failed Job", func(ctx SpecContext) {
		ns := setup(ctx)
		js := trainingJobSet(ns, "elastic", time.Hour)
		js.Spec.FailurePolicy = &jobsetv1.FailurePolicy{MaxRestarts: 2,
			Rules: []jobsetv1.FailurePolicyRule{{Name: "restartTheJob", Action: jobsetv1.RestartJob}}}
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		// Its pods run for an hour on nodes the suite's other specs share:
		// they go with the spec.
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
			Eventually(func(g Gomega) { g.Expect(jobSetPods(ctx, g, js)).To(BeEmpty()) }, timeout, interval).Should(Succeed())
		})
		uids := map[string]types.UID{} // pod UID per Job
		Eventually(func(g Gomega) {
			pods := jobSetPods(ctx, g, js)
			g.Expect(pods).To(HaveLen(3))
			for _, p := range pods {
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
				uids[p.Labels[batchv1.JobNameLabel]] = p.UID
			}
		}, timeout, interval).Should(Succeed())
		var wl berthv1.Workload
		Eventually(func(g Gomega) {
			wls := workloadsOf(ctx, g, js)
			g.Expect(wls).To(HaveLen(1))
			wl = wls[0]
		}, timeout, interval).Should(Succeed())
		next := builders.Job(ns, "next", "team").Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, next)).To(Succeed())
		// Deleted before the JobSet (cleanups run last first): once the
		// JobSet goes, it would be admitted and hold 8 GPUs of the nodes
		// the next spec needs.
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, next, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(podsWith(ctx, g, ns, map[string]string{batchv1.JobNameLabel: next.Name})).To(BeEmpty())
			}, timeout, interval).Should(Succeed())
		})

		By("failing one worker's Job: its pod is deleted, and its Job has no retry left")
		failed := "elastic-workers-1"
		for _, p := range jobSetPods(ctx, Default, js) {
			if p.Labels[batchv1.JobNameLabel] == failed {
				Expect(env.Client.Delete(ctx, &p)).To(Succeed())
			}
		}
		Eventually(func(g Gomega) {
			fresh := &jobsetv1.JobSet{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(js), fresh)).To(Succeed())
			var workers *jobsetv1.ReplicatedJobStatus
			for i := range fresh.Status.ReplicatedJobsStatus {
				if fresh.Status.ReplicatedJobsStatus[i].Name == "workers" {
					workers = &fresh.Status.ReplicatedJobsStatus[i]
				}
			}
			g.Expect(workers).NotTo(BeNil())
			g.Expect(workers.JobRestarts).To(Equal([]int32{0, 1}), "only the failed Job was restarted")
			g.Expect(fresh.Status.Restarts).To(BeZero(), "the JobSet was not restarted as a whole")
			pods := jobSetPods(ctx, g, js)
			g.Expect(pods).To(HaveLen(3))
			for _, p := range pods {
				job := p.Labels[batchv1.JobNameLabel]
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(productLabel, product), "the recreated Job keeps the flavor")
				if job == failed {
					g.Expect(p.UID).NotTo(Equal(uids[job]), "the failed Job's pod is new")
				} else {
					g.Expect(p.UID).To(Equal(uids[job]), "the other Jobs run on")
				}
			}
		}, 2*timeout, interval).Should(Succeed())

		By("the gang stays admitted, neither evicted nor queued again, and its quota stays charged")
		Consistently(func(g Gomega) {
			wls := workloadsOf(ctx, g, js)
			g.Expect(wls).To(HaveLen(1))
			g.Expect(wls[0].UID).To(Equal(wl.UID))
			g.Expect(wls[0].Status.Admission).NotTo(BeNil())
			g.Expect(wls[0].Status.Conditions).NotTo(ContainElement(And(
				HaveField("Type", berthv1.ConditionEvicted), HaveField("Status", metav1.ConditionTrue))))
			fresh := &batchv1.Job{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(next), fresh)).To(Succeed())
			g.Expect(fresh.Spec.Suspend).To(HaveValue(BeTrue()))
		}, held, interval).Should(Succeed())
	})
})
