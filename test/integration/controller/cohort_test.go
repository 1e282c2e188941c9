package controller_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// admittedIn returns how many workloads the ClusterQueue holds, as its
// status reports it.
func admittedIn(ctx context.Context, name string) func(Gomega) int32 {
	return func(g Gomega) int32 {
		cq := &berthv1.ClusterQueue{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, cq)).To(Succeed())
		return cq.Status.AdmittedWorkloads
	}
}

// borrowedBy returns how many GPUs the ClusterQueue borrows, as its status
// reports it.
func borrowedBy(ctx context.Context, name string) func(Gomega) string {
	return func(g Gomega) string {
		cq := &berthv1.ClusterQueue{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, cq)).To(Succeed())
		if len(cq.Status.FlavorsUsage) == 0 {
			return "0"
		}
		return cq.Status.FlavorsUsage[0].Resources[0].Borrowed.String()
	}
}

var _ = Describe("cohorts", func() {
	var ns, flavor string

	// team creates a ClusterQueue in the spec's cohort and a LocalQueue for
	// it, and returns the LocalQueue's name.
	team := func(ctx SpecContext, name, nominal, borrowing string, mutate func(*berthv1.ClusterQueue)) string {
		cq := builders.ClusterQueue(ns+"-"+name).Cohort(ns).Quota(flavor, builders.GPU, nominal, borrowing).Obj()
		if mutate != nil {
			mutate(cq)
		}
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, name, cq.Name))).To(Succeed())
		return cq.Name
	}

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		flavor = ns
		Expect(env.Client.Create(ctx, builders.Flavor(flavor, nil))).To(Succeed())
	})

	It("lends unused quota to a team that borrows, and gives it back when the borrower finishes", func(ctx SpecContext) {
		a := team(ctx, "a", "4", "4", nil)
		b := team(ctx, "b", "4", "", nil)
		big := builders.Job(ns, "big", "a").Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, big)).To(Succeed())
		Eventually(suspended(ctx, big), timeout, interval).Should(BeFalse())
		Eventually(admittedIn(ctx, a), timeout, interval).Should(Equal(int32(1)))
		Eventually(borrowedBy(ctx, a), timeout, interval).Should(Equal("4"))

		small := builders.Job(ns, "small", "b").Request(builders.GPU, "4").Obj()
		Expect(env.Client.Create(ctx, small)).To(Succeed())
		Eventually(func(g Gomega) string {
			wl, err := workloadOf(ctx, small)
			g.Expect(err).NotTo(HaveOccurred())
			c := condition(wl, berthv1.ConditionQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			return c.Reason
		}, timeout, interval).Should(Equal("InsufficientQuota"))
		Consistently(suspended(ctx, small), "1s", interval).Should(BeTrue(), "without a preemption policy the lender waits")

		Expect(env.Client.Delete(ctx, big)).To(Succeed())
		Eventually(suspended(ctx, small), timeout, interval).Should(BeFalse())
		Eventually(admittedIn(ctx, b), timeout, interval).Should(Equal(int32(1)))
	})

	It("reclaims lent quota by preempting the borrower when the lender needs it", func(ctx SpecContext) {
		team(ctx, "a", "4", "4", nil)
		b := team(ctx, "b", "4", "", func(cq *berthv1.ClusterQueue) {
			cq.Spec.Preemption.ReclaimWithinCohort = berthv1.PreemptAny
		})
		borrower := builders.Job(ns, "borrower", "a").Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, borrower)).To(Succeed())
		Eventually(suspended(ctx, borrower), timeout, interval).Should(BeFalse())

		lender := builders.Job(ns, "lender", "b").Request(builders.GPU, "4").Obj()
		Expect(env.Client.Create(ctx, lender)).To(Succeed())
		Eventually(suspended(ctx, lender), timeout, interval).Should(BeFalse())
		Eventually(admittedIn(ctx, b), timeout, interval).Should(Equal(int32(1)))

		By("suspending the borrower and queueing it again, with a condition that says why")
		Eventually(suspended(ctx, borrower), timeout, interval).Should(BeTrue())
		Eventually(func(g Gomega) {
			wl, err := workloadOf(ctx, borrower)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl.Status.Admission).To(BeNil())
			ev := condition(wl, berthv1.ConditionEvicted)
			g.Expect(ev).NotTo(BeNil())
			g.Expect(ev.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(ev.Reason).To(Equal(string(berthv1.ReasonRequeued)))
			// Told once, on the job its owner watches: no event per victim on
			// the Workload.
			g.Expect(eventReasons(ctx, ns, borrower.Name)(g)).To(ContainElement(HavePrefix("Stopped: preempted to admit")))
			g.Expect(eventReasons(ctx, ns, wl.Name)(g)).NotTo(ContainElement(HavePrefix("Preempted:")))
		}, timeout, interval).Should(Succeed())
		Consistently(suspended(ctx, borrower), "1s", interval).Should(BeTrue(), "only 4 GPUs are left for it")
	})

	It("shares a cohort between three teams in proportion to their weights 1:1:2", func(ctx SpecContext) {
		weights := map[string]string{"t1": "1", "t2": "1", "t3": "2"}
		queues := map[string]string{}
		for name, w := range weights {
			queues[name] = team(ctx, name, "0", "", func(cq *berthv1.ClusterQueue) {
				q := resource.MustParse(w)
				cq.Spec.FairSharing.Weight = &q
			})
		}
		By("queueing 30 one-GPU workloads per team while the cohort has no quota")
		for name := range weights {
			for i := range 30 {
				Expect(env.Client.Create(ctx, &berthv1.Workload{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%02d", name, i)},
					Spec: berthv1.WorkloadSpec{QueueName: name, PodSets: []berthv1.PodSet{{
						Name: "main", Count: 1, Requests: corev1.ResourceList{builders.GPU: resource.MustParse("1")},
					}}},
				})).To(Succeed())
			}
		}
		Eventually(func(g Gomega) {
			wl := &berthv1.Workload{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "t3-29"}, wl)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(wl.Status.Conditions, berthv1.ConditionQuotaReserved)).To(BeTrue())
		}, timeout, interval).Should(Succeed())

		By("adding a lender with 40 GPUs")
		team(ctx, "pool", "40", "", nil)
		for name, want := range map[string]int32{"t1": 10, "t2": 10, "t3": 20} {
			Eventually(admittedIn(ctx, queues[name]), timeout, interval).Should(Equal(want), "team %s", name)
		}
	})
})
