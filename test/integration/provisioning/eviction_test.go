package provisioning_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// expectStoppedAndRequeued waits until the Job is suspended without the
// booking's annotations and its Workload released its quota.
func expectStoppedAndRequeued(ctx SpecContext, job *batchv1.Job, wl *berthv1.Workload) {
	expectJob(ctx, job, func(g Gomega, j *batchv1.Job) {
		g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue())
		g.Expect(j.Spec.Template.Annotations).NotTo(HaveKey(autoscalingv1.ProvisioningRequestPodAnnotationKey))
		g.Expect(j.Spec.Template.Annotations).NotTo(HaveKey(autoscalingv1.ProvisioningClassPodAnnotationKey))
	})
	Eventually(func(g Gomega) {
		got := workload(ctx, g, wl)
		g.Expect(got.Status.Admission).To(BeNil())
		g.Expect(condition(got, berthv1.ConditionEvicted).Reason).To(Equal(string(berthv1.ReasonRequeued)))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

var _ = Describe("bookings of started gangs", func() {
	BeforeEach(func(ctx SpecContext) { installAPI(ctx) })
	policy := berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 3, BackoffSeconds: 10}

	It("evicts a gang whose capacity is revoked, with a backoff", func(ctx SpecContext) {
		tc := newCase(ctx, policy)
		job, wl, p := startOnBooking(ctx, tc)
		pr := request(ctx, tc.ns, p.RequestName)
		pr.Annotations = map[string]string{autoscaler.RevokeAnnotation: "true"}
		Expect(env.Client.Update(ctx, pr)).To(Succeed())
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Provisioning.State).To(Equal(berthv1.ProvisioningCapacityRevoked))
			g.Expect(got.Status.Provisioning.RetryAfter).NotTo(BeNil())
			g.Expect(condition(got, berthv1.ConditionEvicted).Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		expectStoppedAndRequeued(ctx, job, wl)
		expectGone(ctx, pr)
	})

	It("gives a booking that expired before the pods used it up, stopping the Job", func(ctx SpecContext) {
		tc := newCase(ctx, policy)
		job, wl, p := startOnBooking(ctx, tc)
		autoscalerClock.Step(bookingTTL + time.Minute)
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Provisioning.State).To(Equal(berthv1.ProvisioningBookingExpired))
			g.Expect(got.Status.Provisioning.FailedDomains).To(Equal([]berthv1.TopologyAssignment{*tc.rack("r1")}))
			g.Expect(got.Status.Provisioning.RetryAfter).NotTo(BeNil())
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		expectStoppedAndRequeued(ctx, job, wl)
		expectGone(ctx, &autoscalingv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: p.RequestName}})
	})

	It("stops a started gang whose pods carry the booking but were never bound when it expired", func(ctx SpecContext) {
		tc := newCase(ctx, policy)
		job, wl, p := startOnBooking(ctx, tc)
		gangPod(ctx, wl, p.RequestName, "", false)
		gangPod(ctx, wl, p.RequestName, "", false)
		autoscalerClock.Step(bookingTTL + time.Minute)
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Provisioning.State).To(Equal(berthv1.ProvisioningBookingExpired))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		expectJob(ctx, job, func(g Gomega, j *batchv1.Job) { g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue()) })
		// The quota waits for the pods, bound or not; no Job controller
		// runs here to delete the suspended Job's pods, so the spec does.
		Expect(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(wl.Namespace),
			client.MatchingLabels{berthv1.WorkloadLabel: string(wl.UID)})).To(Succeed())
		expectStoppedAndRequeued(ctx, job, wl)
	})

	It("keeps a started gang whose booking expired after its pods used it", func(ctx SpecContext) {
		tc := newCase(ctx, policy)
		job, wl, p := startOnBooking(ctx, tc)
		gangPod(ctx, wl, p.RequestName, "n1", true)
		gangPod(ctx, wl, p.RequestName, "n1", true)
		autoscalerClock.Step(bookingTTL + time.Minute)
		pr := request(ctx, tc.ns, p.RequestName)
		Eventually(func(g Gomega) bool {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pr), pr)).To(Succeed())
			return meta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.BookingExpired)
		}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
		Consistently(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(lifecycle.PhaseOf(got)).To(Equal(lifecycle.Admitted))
		}).WithTimeout(2 * time.Second).WithPolling(interval).Should(Succeed())
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		Expect(ptr.Deref(job.Spec.Suspend, true)).To(BeFalse())
	})

	It("evicts a gang whose pods are not all Ready in time", func(ctx SpecContext) {
		pol := policy
		pol.PodsReadySeconds = 60
		tc := newCase(ctx, pol)
		job, wl, p := startOnBooking(ctx, tc)
		gangPod(ctx, wl, p.RequestName, "n1", true)
		gangPod(ctx, wl, p.RequestName, "n1", false)
		berthClock.Step(61 * time.Second)
		poke(ctx, wl)
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			ev := condition(got, berthv1.ConditionEvicted)
			g.Expect(ev.Reason).To(BeElementOf(string(berthv1.ReasonPodsNotReady), string(berthv1.ReasonRequeued)))
			g.Expect(condition(got, berthv1.ConditionPodsReady).Message).To(ContainSubstring("1 of 2 pods"))
			g.Expect(got.Status.Provisioning.State).To(Equal(berthv1.ProvisioningPodsNotReady))
			g.Expect(got.Status.Provisioning.FailedDomains).To(Equal([]berthv1.TopologyAssignment{*tc.rack("r1")}))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		expectJob(ctx, job, func(g Gomega, j *batchv1.Job) { g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue()) })
	})

	It("keeps a gang whose pods were all Ready in time", func(ctx SpecContext) {
		pol := policy
		pol.PodsReadySeconds = 60
		tc := newCase(ctx, pol)
		job, wl, p := startOnBooking(ctx, tc)
		gangPod(ctx, wl, p.RequestName, "n1", true)
		gangPod(ctx, wl, p.RequestName, "n1", true)
		berthClock.Step(61 * time.Second)
		poke(ctx, wl)
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(condition(got, berthv1.ConditionPodsReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(lifecycle.PhaseOf(got)).To(Equal(lifecycle.Running))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Consistently(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(condition(got, berthv1.ConditionEvicted).Status).NotTo(Equal(metav1.ConditionTrue))
		}).WithTimeout(time.Second).WithPolling(interval).Should(Succeed())
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		Expect(ptr.Deref(job.Spec.Suspend, true)).To(BeFalse())
	})
})
