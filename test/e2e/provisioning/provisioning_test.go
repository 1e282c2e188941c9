package provisioning_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/test/jobsuite"
)

// poolNodes counts the nodes the autoscaler created in a pool.
func poolNodes(ctx context.Context, pool string) func(Gomega) int {
	return func(g Gomega) int {
		nodes := &corev1.NodeList{}
		g.Expect(env.Client.List(ctx, nodes, client.MatchingLabels{berthv1.CapacityPoolLabel: pool})).To(Succeed())
		return len(nodes.Items)
	}
}

// request reads the job's current ProvisioningRequest.
func request(ctx context.Context, g Gomega, job *batchv1.Job) *autoscalingv1.ProvisioningRequest {
	wl := workloadOf(ctx, g, job)
	g.Expect(wl.Status.Provisioning).NotTo(BeNil())
	pr := &autoscalingv1.ProvisioningRequest{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: wl.Status.Provisioning.RequestName}, pr)).To(Succeed())
	return pr
}

var _ = Describe("capacity provisioned in one rack", func() {
	It("(a) scales up inside one rack for a rack-bound gang while free GPUs are scattered over racks", func(ctx SpecContext) {
		ns := rackSetup(ctx, []string{"r1", "r2"}, map[string]int32{"r1": 2, "r2": 2})
		job := gang(ctx, ns, "train", 3*time.Second)

		By("booking one new node in r1, where a free node completes the gang, with a request pinned to r1")
		Eventually(func(g Gomega) {
			pr := request(ctx, g, job)
			g.Expect(pr.Spec.ProvisioningClassName).To(Equal(autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp))
			tmpl := &corev1.PodTemplate{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.PodSets[0].PodTemplateRef.Name}, tmpl)).To(Succeed())
			g.Expect(tmpl.Template.Spec.NodeSelector).To(And(HaveKeyWithValue(rackLabel, "r1"), HaveKeyWithValue(poolLabel, ns)))
		}, timeout, interval).Should(Succeed())
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r1"}))
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(1))
		Expect(poolNodes(ctx, ns+"-r2")(Default)).To(Equal(0))
		Eventually(func(g Gomega) int32 {
			pool := &berthv1.CapacityPool{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns + "-r1"}, pool)).To(Succeed())
			return pool.Status.Nodes
		}, timeout, interval).Should(Equal(int32(1)), "berth counts the pool's nodes; no autoscaler writes the status")
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("(b) books in another rack after the preferred one found no capacity for the bound, and binds no pod before admission", func(ctx SpecContext) {
		ns := rackSetup(ctx, []string{"r1"}, map[string]int32{"r1": 2, "r2": 2})
		pool := &berthv1.CapacityPool{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns + "-r1"}, pool)).To(Succeed())
		Expect(env.Client.Patch(ctx, pool, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+autoscaler.StockoutAnnotation+`":"true"}}}`)))).To(Succeed())
		job := gang(ctx, ns, "train", 3*time.Second)
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r2"}))
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			g.Expect(wl.Status.Provisioning.Attempt).To(BeNumerically(">=", 2))
			g.Expect(wl.Status.Provisioning.FailedDomains).To(ContainElement(HaveField("Values", Equal([]string{"zone-a", "r1"}))))
		}, timeout, interval).Should(Succeed())
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(0), "the stocked-out pool created nothing")
		Eventually(func(g Gomega) []string {
			return jobsuite.EventReasons(ctx, env.Client, ns, workloadOf(ctx, g, job).Name)(g)
		}, timeout, interval).Should(ContainElement(And(HavePrefix("ProvisioningFailed"), ContainSubstring("found no capacity for"),
			ContainSubstring(fmt.Sprintf("(capacityNotFoundSeconds %d)", notFoundBound)))))
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
		attempts := env.Berth().Metrics.ProvisioningAttemptsTotal
		Expect(testutil.ToFloat64(attempts.WithLabelValues(autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, "CapacityNotFound"))).To(BeNumerically(">=", 1))
		Expect(testutil.ToFloat64(attempts.WithLabelValues(autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, "Provisioned"))).To(BeNumerically(">=", 1))
	})

	It("(c) retries a booking that expired before the gang started, and admits it", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, map[string]int32{"r1": 2})
		By("asking for capacity while the autoscaler is down, then stopping berth, so the gang cannot start before the booking expires")
		Expect(stopAutoscale()).To(Succeed())
		job := gang(ctx, ns, "train", 3*time.Second)
		Eventually(func(g Gomega) { request(ctx, g, job) }, timeout, interval).Should(Succeed())
		Expect(env.StopBerth()).To(Succeed())
		var err error
		stopAutoscale, err = env.StartAutoscaler(ctx, autoscalerOptions)
		Expect(err).NotTo(HaveOccurred())
		restarted := false
		DeferCleanup(func() error {
			if restarted {
				return nil
			}
			_, err := env.StartBerth(berthOptions())
			return err
		})
		Eventually(func(g Gomega) {
			pr := request(ctx, g, job)
			g.Expect(meta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.BookingExpired)).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) bool {
			fresh := &batchv1.Job{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
			return *fresh.Spec.Suspend
		}, held, interval).Should(BeTrue())

		By("starting berth again: the expired booking is retried and the gang admitted")
		_, err = env.StartBerth(berthOptions())
		Expect(err).NotTo(HaveOccurred())
		restarted = true
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r1"}))
		// The nodes created for the expired booking now exist: the retry
		// admits the gang on them, without booking again.
		Eventually(func(g Gomega) []string {
			return jobsuite.EventReasons(ctx, env.Client, ns, workloadOf(ctx, g, job).Name)(g)
		}, timeout, interval).Should(ContainElement(And(HavePrefix("ProvisioningFailed"), ContainSubstring("expired"))))
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("(d) evicts a gang whose capacity is revoked, requeues it and admits it again", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, map[string]int32{"r1": 2})
		job := gang(ctx, ns, "serve", 10*time.Minute)
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r1"}))
		var first string
		Eventually(func(g Gomega) {
			pr := request(ctx, g, job)
			first = pr.Name
			g.Expect(env.Client.Patch(ctx, pr, client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"`+autoscaler.RevokeAnnotation+`":"true"}}}`)))).To(Succeed())
		}, timeout, interval).Should(Succeed())
		By("stopping the gang: every pod goes, none is left running half")
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			ev := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionEvicted)
			g.Expect(ev).NotTo(BeNil())
			g.Expect(wl.Status.Provisioning.State).To(Equal(berthv1.ProvisioningCapacityRevoked))
		}, timeout, interval).Should(Succeed())
		By("admitting it again, on the rack's nodes")
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionEvicted)).To(BeFalse())
		}, timeout, interval).Should(Succeed())
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r1"}))
		_ = first
	})

	It("(e) admits a gang that fits existing free capacity without waiting for new nodes", func(ctx SpecContext) {
		ns := rackSetup(ctx, []string{"r1", "r1"}, map[string]int32{"r1": 2})
		job := gang(ctx, ns, "train", 3*time.Second)
		Eventually(racksOf(ctx, job), timeout, interval).Should(Equal([]string{"r1"}))
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			g.Expect(wl.Status.Provisioning).To(BeNil(), "no booking")
		}, timeout, interval).Should(Succeed())
		prs := &autoscalingv1.ProvisioningRequestList{}
		Expect(env.Client.List(ctx, prs, client.InNamespace(ns))).To(Succeed())
		Expect(prs.Items).To(BeEmpty())
		Expect(poolNodes(ctx, ns+"-r1")(Default)).To(Equal(0))
		Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue())
	})

	It("says when no rack can ever hold a gang, and books nothing", func(ctx SpecContext) {
		ns := rackSetup(ctx, []string{"r1"}, map[string]int32{"r1": 1, "r2": 2})
		job := gangOf(ctx, ns, "too-big", 3, time.Minute)
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			qr := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved)
			g.Expect(qr).NotTo(BeNil())
			g.Expect(qr.Reason).To(Equal(string(berthv1.ReasonExceedsDomainCapacity)))
			g.Expect(qr.Message).To(ContainSubstring("can ever hold all 3 pods"))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) []string {
			return jobsuite.EventReasons(ctx, env.Client, ns, workloadOf(ctx, g, job).Name)(g)
		}, timeout, interval).Should(ContainElement(HavePrefix("Inadmissible")))
		Consistently(func(g Gomega) []autoscalingv1.ProvisioningRequest {
			prs := &autoscalingv1.ProvisioningRequestList{}
			g.Expect(env.Client.List(ctx, prs, client.InNamespace(ns))).To(Succeed())
			return prs.Items
		}, held, interval).Should(BeEmpty())
		Expect(poolNodes(ctx, ns+"-r1")(Default) + poolNodes(ctx, ns+"-r2")(Default)).To(Equal(0))
	})

	It("books a gang unpinned, and says so, when its flavor has no CapacityPool", func(ctx SpecContext) {
		ns := rackSetup(ctx, nil, nil)
		job := gang(ctx, ns, "anywhere", 3*time.Second)
		Expect(env.Client.Patch(ctx, job, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+berthv1.TopologyRequiredAnnotation+`":null}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, g, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Admission.Topology).To(BeNil())
			g.Expect(wl.Status.Provisioning).NotTo(BeNil())
			g.Expect(wl.Status.Provisioning.Message).To(ContainSubstring("unpinned"))
			pr := request(ctx, g, job)
			tmpl := &corev1.PodTemplate{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.PodSets[0].PodTemplateRef.Name}, tmpl)).To(Succeed())
			g.Expect(tmpl.Template.Spec.NodeSelector).To(Equal(map[string]string{poolLabel: ns}), "the flavor's labels, no domain")
		}, timeout, interval).Should(Succeed())
	})

	It("(f) runs bursts of gangs from twenty teams with no partial gang and no pod bound before admission", func(ctx SpecContext) {
		ns := rackSetup(ctx, []string{"r1", "r2"}, map[string]int32{"r1": 3, "r2": 3, "r3": 3})
		var jobs []*batchv1.Job
		for t := range 20 {
			team := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-t%02d", ns, t)}}
			Expect(env.Client.Create(ctx, team)).To(Succeed())
			Expect(env.Client.Create(ctx, &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: team.Name, Name: "team"},
				Spec: berthv1.LocalQueueSpec{ClusterQueue: ns}})).To(Succeed())
			for i := range 2 {
				jobs = append(jobs, gang(ctx, team.Name, fmt.Sprintf("burst-%d", i), 2*time.Second))
			}
		}
		for _, job := range jobs {
			Eventually(jobsuite.Completed(ctx, env.Client, job), 8*time.Minute, time.Second).Should(BeTrue(), "%s/%s", job.Namespace, job.Name)
			Expect(racksOf(ctx, job)(Default)).To(HaveLen(1), "%s/%s ran in one rack", job.Namespace, job.Name)
		}
	})
})
