package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/test/builders"
)

var _ = Describe("queue metrics", func() {
	It("follow what the queue holds, why its workloads wait, and its evictions", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.Flavor(ns, nil))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, "8", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
		fits := builders.Job(ns, "fits", "team").Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, fits)).To(Succeed())
		Eventually(suspended(ctx, fits), timeout, interval).Should(BeFalse())
		for _, job := range []client.Object{
			builders.Job(ns, "waits", "team").Request(builders.GPU, "4").Obj(),
			builders.Job(ns, "never", "team").Request(builders.GPU, "100").Obj(),
		} {
			Expect(env.Client.Create(ctx, job)).To(Succeed())
		}

		q := func() *metrics.Queues { return env.Berth().Metrics.Queues }
		Eventually(func(g Gomega) {
			g.Expect(testutil.ToFloat64(q().AdmittedActiveWorkloads.WithLabelValues(ns))).To(Equal(1.0), "admitted")
			g.Expect(testutil.ToFloat64(q().PendingWorkloads.WithLabelValues(ns, metrics.PendingInadmissible))).To(Equal(2.0), "inadmissible")
			g.Expect(testutil.ToFloat64(q().PendingWorkloads.WithLabelValues(ns, metrics.PendingActive))).To(Equal(0.0), "active")
			g.Expect(testutil.ToFloat64(q().HeldWorkloads.WithLabelValues(ns, string(berthv1.ReasonExceedsMaxQuota)))).To(Equal(1.0), "held")
			g.Expect(testutil.ToFloat64(q().ResourceReservation.WithLabelValues("", ns, ns, string(builders.GPU)))).To(Equal(8.0), "reservation")
			g.Expect(testutil.ToFloat64(q().NominalQuota.WithLabelValues("", ns, ns, string(builders.GPU)))).To(Equal(8.0), "nominal quota")
			g.Expect(testutil.ToFloat64(q().ClusterQueueStatus.WithLabelValues(ns, metrics.QueueStatusActive))).To(Equal(1.0), "active status")
			g.Expect(testutil.ToFloat64(q().AdmittedWorkloadsTotal.WithLabelValues(ns))).To(Equal(1.0), "admissions")
		}, timeout, interval).Should(Succeed())

		cq := &berthv1.ClusterQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
		base := cq.DeepCopy()
		cq.Spec.StopPolicy = berthv1.StopPolicyHoldAndDrain
		Expect(env.Client.Patch(ctx, cq, client.MergeFrom(base))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(testutil.ToFloat64(q().ClusterQueueStatus.WithLabelValues(ns, metrics.QueueStatusPending))).To(Equal(1.0), "stopped: pending status")
			g.Expect(testutil.ToFloat64(q().ClusterQueueStatus.WithLabelValues(ns, metrics.QueueStatusActive))).To(Equal(0.0), "stopped: not active")
			g.Expect(testutil.ToFloat64(q().EvictedWorkloadsTotal.WithLabelValues(ns, string(berthv1.ReasonClusterQueueStopped)))).To(Equal(1.0), "drained")
		}, timeout, interval).Should(Succeed())
	})
})
