package e2e_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

var _ = Describe("GPU Jobs on a real cluster", func() {
	var ns string

	// setup creates a flavor for the H200 nodes, a ClusterQueue with the
	// given GPU quota and a LocalQueue "team" in a new namespace.
	setup := func(ctx SpecContext, gpus string) {
		ns = newNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.Flavor(ns, map[string]string{productLabel: product}))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, gpus, "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
	}

	It("never creates a pod of a labelled Job before it is admitted", func(ctx SpecContext) {
		setup(ctx, "0")
		job := builders.Job(ns, "held", "team").Request(builders.GPU, "8").Suspend(false).
			PodAnnotations(controlplane.RunFor(time.Second)).Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getJob(ctx, g, job).Spec.Suspend).To(HaveValue(BeTrue()))
			g.Expect(podsOf(ctx, g, job)).To(BeEmpty())
		}, "3s", interval).Should(Succeed())

		By("giving the queue quota")
		cq := &berthv1.ClusterQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
		base := cq.DeepCopy()
		cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("8")
		// No resourceVersion: berth's status writes cannot conflict.
		Expect(env.Client.Patch(ctx, cq, client.MergeFrom(base))).To(Succeed())
		Eventually(complete(ctx, job), timeout, interval).Should(Succeed())

		var admittedAt time.Time
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(workloadOf(ctx, g, job).Status.Conditions, berthv1.ConditionAdmitted)
			g.Expect(c).NotTo(BeNil())
			admittedAt = c.LastTransitionTime.Time
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, job)
			g.Expect(pods).NotTo(BeEmpty())
			for _, p := range pods {
				// Timestamps have second precision: created in the same
				// second or later.
				g.Expect(p.CreationTimestamp.Time).NotTo(BeTemporally("<", admittedAt.Truncate(time.Second)))
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(productLabel, product))
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), jobsuite.UnboundReason(&p))
			}
		}, timeout, interval).Should(Succeed())
	})

	It("runs two 8-GPU Jobs one after the other under quota for one", func(ctx SpecContext) {
		setup(ctx, "8")
		var jobs []*batchv1.Job
		for _, name := range []string{"first", "second"} {
			job := builders.Job(ns, name, "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(2 * time.Second)).Obj()
			Expect(env.Client.Create(ctx, job)).To(Succeed())
			jobs = append(jobs, job)
		}
		for _, job := range jobs {
			Eventually(complete(ctx, job), timeout, interval).Should(Succeed())
		}
		expectSerial(ctx, jobs)
	})

	It("runs a Job naming a missing LocalQueue once the queue is created", func(ctx SpecContext) {
		setup(ctx, "8")
		job := builders.Job(ns, "early", "later").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(time.Second)).Obj()
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(workloadOf(ctx, g, job).Status.Conditions, berthv1.ConditionQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(string(berthv1.ReasonLocalQueueNotFound)))
			g.Expect(events(ctx, g, ns, job.Name)).To(ContainElement(ContainSubstring(`LocalQueue "later" does not exist`)))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getJob(ctx, g, job).Spec.Suspend).To(HaveValue(BeTrue()))
		}, "2s", interval).Should(Succeed())

		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "later", ns))).To(Succeed())
		Eventually(complete(ctx, job), timeout, interval).Should(Succeed())
	})

	It("rejects an invalid ClusterQueue with a readable message", func(ctx SpecContext) {
		cq := builders.ClusterQueue("broken").Quota("h200", builders.GPU, "-8", "").Obj()
		err := env.Client.Create(ctx, cq)
		Expect(err).To(MatchError(ContainSubstring(`nominalQuota: Invalid value: "-8": must not be negative`)))
		cq = builders.ClusterQueue("broken").Quota("h200", builders.GPU, "8", "4").Obj()
		err = env.Client.Create(ctx, cq)
		Expect(err).To(MatchError(ContainSubstring("borrowingLimit and lendingLimit require a cohort: set spec.cohort or remove them")))
	})

	It("admits nothing twice and keeps usage when the controller restarts mid-run", func(ctx SpecContext) {
		setup(ctx, "8")
		var jobs []*batchv1.Job
		for _, name := range []string{"a", "b", "c"} {
			job := builders.Job(ns, name, "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(6 * time.Second)).Obj()
			Expect(env.Client.Create(ctx, job)).To(Succeed())
			jobs = append(jobs, job)
		}
		var usage string
		Eventually(func(g Gomega) {
			cq := &berthv1.ClusterQueue{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
			g.Expect(cq.Status.AdmittedWorkloads).To(BeEquivalentTo(1))
			usage = cq.Status.FlavorsUsage[0].Resources[0].Total.String()
		}, timeout, interval).Should(Succeed())
		Expect(usage).To(Equal("8"))

		By("restarting berth while one Job runs and two wait")
		Expect(env.StopBerth()).To(Succeed())
		berth, err := env.StartBerth(berthOptions)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			st, ok := berth.Scheduler.ClusterQueueStatus(ns)
			g.Expect(ok).To(BeTrue())
			g.Expect(st.AdmittedWorkloads).To(BeEquivalentTo(1), "the rebuilt engine holds the running job")
			g.Expect(st.PendingWorkloads).To(BeEquivalentTo(2))
			g.Expect(st.FlavorsUsage[0].Resources[0].Total.String()).To(Equal(usage))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			running := 0
			for _, job := range jobs {
				if fresh := getJob(ctx, g, job); fresh.Spec.Suspend != nil && !*fresh.Spec.Suspend && fresh.Status.CompletionTime == nil {
					running++
				}
			}
			g.Expect(running).To(BeNumerically("<=", 1))
		}, "2s", interval).Should(Succeed())

		for _, job := range jobs {
			Eventually(complete(ctx, job), timeout, interval).Should(Succeed())
		}
		expectSerial(ctx, jobs)
		for _, job := range jobs {
			starts := 0
			for _, e := range events(ctx, Default, ns, job.Name) {
				if strings.HasPrefix(e, "Started:") {
					starts++
				}
			}
			Expect(starts).To(Equal(1), "job %s started once", job.Name)
		}
		Expect(testutil.ToFloat64(berth.Metrics.AdmissionsTotal.WithLabelValues(metrics.ResultAdmitted))).
			To(BeEquivalentTo(2), "after the restart only the two waiting jobs were admitted")
	})
})

// expectSerial checks that no two of the jobs ran at the same time.
func expectSerial(ctx SpecContext, jobs []*batchv1.Job) {
	type span struct{ start, end time.Time }
	var spans []span
	for _, job := range jobs {
		fresh := getJob(ctx, Default, job)
		Expect(fresh.Status.StartTime).NotTo(BeNil())
		Expect(fresh.Status.CompletionTime).NotTo(BeNil())
		spans = append(spans, span{fresh.Status.StartTime.Time, fresh.Status.CompletionTime.Time})
	}
	for i := range spans {
		for j := range spans {
			if i == j {
				continue
			}
			overlap := spans[i].start.Before(spans[j].end) && spans[j].start.Before(spans[i].end)
			Expect(overlap).To(BeFalse(), "jobs %s and %s ran at the same time", jobs[i].Name, jobs[j].Name)
		}
	}
}
