package kubectlberth_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)

// queueSetup creates a namespace, a flavor and a ClusterQueue of 8 GPUs
// named after it, and the LocalQueue "team"; it returns the namespace.
func queueSetup(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "stop-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.Flavor(ns.Name, nil))).To(Succeed())
	Expect(env.Client.Create(ctx, builders.ClusterQueue(ns.Name).Quota(ns.Name, builders.GPU, "8", "").Obj())).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns.Name, "team", ns.Name))).To(Succeed())
	return ns.Name
}

// submit creates a Job of one 4-GPU pod in the namespace's LocalQueue.
func submit(ctx context.Context, ns, name string) *batchv1.Job {
	job := builders.Job(ns, name, "team").Request(builders.GPU, "4").Obj()
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	return job
}

// running reports whether berth let the job run (it is not suspended).
func running(ctx context.Context, job *batchv1.Job) func(Gomega) bool {
	return func(g Gomega) bool {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		return !ptr.Deref(fresh.Spec.Suspend, false)
	}
}

// evictions reads berth_evicted_workloads_total of a ClusterQueue and
// reason from the registry berth reports to, as a scrape would.
func evictions(clusterQueue, reason string) float64 {
	families, err := registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "berth_evicted_workloads_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster_queue"] == clusterQueue && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// workloadOf returns the job's Workload.
func workloadOf(ctx context.Context, g Gomega, job *batchv1.Job) *berthv1.Workload {
	wls := &berthv1.WorkloadList{}
	g.Expect(env.Client.List(ctx, wls, client.InNamespace(job.Namespace))).To(Succeed())
	for i := range wls.Items {
		if ref := metav1.GetControllerOf(&wls.Items[i]); ref != nil && ref.UID == job.UID {
			return &wls.Items[i]
		}
	}
	g.Expect(fmt.Errorf("no Workload for Job %s yet", job.Name)).NotTo(HaveOccurred())
	return nil
}

// waitReason is the reason of the job's Workload's QuotaReserved.
func waitReason(ctx context.Context, job *batchv1.Job) func(Gomega) string {
	return func(g Gomega) string {
		c := meta.FindStatusCondition(workloadOf(ctx, g, job).Status.Conditions, berthv1.ConditionQuotaReserved)
		g.Expect(c).NotTo(BeNil())
		return c.Reason
	}
}

// activeReason is the reason of a queue's Active condition.
func activeReason(ctx context.Context, obj client.Object) func(Gomega) string {
	return func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		var conds []metav1.Condition
		switch q := obj.(type) {
		case *berthv1.LocalQueue:
			conds = q.Status.Conditions
		case *berthv1.ClusterQueue:
			conds = q.Status.Conditions
		}
		c := meta.FindStatusCondition(conds, berthv1.ConditionActive)
		g.Expect(c).NotTo(BeNil())
		return c.Reason
	}
}

var _ = Describe("kubectl berth stop and resume", func() {
	It("holds a LocalQueue's new work, drains it when asked, and admits it again on resume", func(ctx SpecContext) {
		ns := queueSetup(ctx)
		first := submit(ctx, ns, "first")
		Eventually(running(ctx, first), timeout, interval).Should(BeTrue())

		out, _, err := berth("", "stop", "localqueue", "team", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal(fmt.Sprintf("LocalQueue %s/team stopped\n", ns)))
		lq := &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}}
		Eventually(activeReason(ctx, lq), timeout, interval).Should(Equal(berthv1.ReasonStopped))
		second := submit(ctx, ns, "second")
		Eventually(waitReason(ctx, second), timeout, interval).Should(Equal(string(berthv1.ReasonLocalQueueStopped)))
		Consistently(running(ctx, first), "1s", interval).Should(BeTrue(), "Hold keeps admitted work running")

		_, _, err = berth("", "stop", "localqueue", "team", "--drain", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Eventually(running(ctx, first), timeout, interval).Should(BeFalse(), "HoldAndDrain evicts admitted work")
		Eventually(waitReason(ctx, first), timeout, interval).Should(Equal(string(berthv1.ReasonLocalQueueStopped)))

		out, _, err = berth("", "resume", "localqueue", "team", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal(fmt.Sprintf("LocalQueue %s/team resumed\n", ns)))
		Eventually(running(ctx, first), timeout, interval).Should(BeTrue())
		Eventually(running(ctx, second), timeout, interval).Should(BeTrue())
	})

	It("stops and resumes a ClusterQueue", func(ctx SpecContext) {
		ns := queueSetup(ctx)
		_, _, err := berth("", "stop", "clusterqueue", ns)
		Expect(err).NotTo(HaveOccurred())
		cq := &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		Eventually(activeReason(ctx, cq), timeout, interval).Should(Equal(berthv1.ReasonStopped))
		job := submit(ctx, ns, "held")
		Eventually(waitReason(ctx, job), timeout, interval).Should(Equal(string(berthv1.ReasonClusterQueueStopped)))
		_, _, err = berth("", "resume", "clusterqueue", ns)
		Expect(err).NotTo(HaveOccurred())
		Eventually(running(ctx, job), timeout, interval).Should(BeTrue())
	})

	It("says which queue does not exist", func(ctx SpecContext) {
		_, _, err := berth("", "stop", "localqueue", "nowhere", "-n", "default")
		Expect(err).To(MatchError("LocalQueue default/nowhere not found"))
		_, _, err = berth("", "resume", "clusterqueue", "nowhere")
		Expect(err).To(MatchError("ClusterQueue nowhere not found"))
	})
})

var _ = Describe("kubectl berth deactivate and activate", func() {
	It("evicts a deactivated Workload, holds it, and queues it again once activated", func(ctx SpecContext) {
		ns := queueSetup(ctx)
		job := submit(ctx, ns, "train")
		Eventually(running(ctx, job), timeout, interval).Should(BeTrue())
		var name string
		Eventually(func(g Gomega) { name = workloadOf(ctx, g, job).Name }, timeout, interval).Should(Succeed())

		out, _, err := berth("", "deactivate", "workload", name, "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal(fmt.Sprintf("Workload %s/%s deactivated\n", ns, name)))
		Eventually(running(ctx, job), timeout, interval).Should(BeFalse())
		Eventually(waitReason(ctx, job), timeout, interval).Should(Equal(string(berthv1.ReasonDeactivated)))
		Consistently(running(ctx, job), "1s", interval).Should(BeFalse(), "a deactivated Workload is not admitted again")
		// The queue is the namespace's own: its one eviction is this one.
		Expect(evictions(ns, string(berthv1.ReasonDeactivated))).To(Equal(1.0))

		_, _, err = berth("", "activate", "workload", name, "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Eventually(running(ctx, job), timeout, interval).Should(BeTrue())
	})

	It("says which Workload does not exist", func(ctx SpecContext) {
		_, _, err := berth("", "deactivate", "workload", "nowhere", "-n", "default")
		Expect(err).To(MatchError("Workload default/nowhere not found"))
	})
})
