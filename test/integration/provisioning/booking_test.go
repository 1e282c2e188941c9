package provisioning_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/provisioning"
	"github.com/berth-dev/berth/test/builders"
)

const scaleUp = autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp

// startOnBooking books rack r1 for a Job of two 8-GPU pods and waits until
// the Job runs on it.
func startOnBooking(ctx context.Context, tc *testCase) (*batchv1.Job, *berthv1.Workload, *berthv1.ProvisioningStatus) {
	tc.pool(ctx, "r1", 2, nil)
	job, wl := tc.job(ctx)
	p := tc.reserve(ctx, wl, tc.rack("r1"))
	Eventually(func(g Gomega) {
		got := workload(ctx, g, wl)
		g.Expect(condition(got, berthv1.ConditionAdmitted).Status).To(Equal(metav1.ConditionTrue), "%v", got.Status)
		g.Expect(got.Status.Provisioning.State).To(Equal(berthv1.ProvisioningProvisioned))
		g.Expect(lifecycle.PhaseOf(got)).To(Equal(lifecycle.Admitted))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	expectJob(ctx, job, func(g Gomega, j *batchv1.Job) {
		g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
	})
	return job, wl, p
}

// expectNotFoundNoted waits until berth recorded that the autoscaler found
// no capacity for the workload's current booking.
func expectNotFoundNoted(ctx context.Context, wl *berthv1.Workload) {
	Eventually(func(g Gomega) {
		got := workload(ctx, g, wl)
		g.Expect(got.Status.Provisioning.CapacityNotFoundSince).NotTo(BeNil())
		g.Expect(condition(got, berthv1.ConditionAdmitted).Message).To(ContainSubstring("found no capacity"))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

var _ = Describe("capacity bookings", func() {
	BeforeEach(func(ctx SpecContext) { installAPI(ctx) })

	It("books the gang's rack and starts the Job on it with the consume annotations", func(ctx SpecContext) {
		tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, Parameters: map[string]string{"team": "a"}, MaxAttempts: 3, BackoffSeconds: 10})
		tc.pool(ctx, "r1", 2, nil)
		job, wl := tc.job(ctx)

		By("an earlier attempt's request is left from before")
		old := &autoscalingv1.ProvisioningRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: wl.Name + "-1"},
			Spec: autoscalingv1.ProvisioningRequestSpec{
				ProvisioningClassName: "other.example.com",
				PodSets:               []autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: wl.Name + "-1-main"}, Count: 2}},
			},
		}
		oldTemplate := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: wl.Name + "-1-main"}}
		oldTemplate.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: provisioning.PauseImage}}
		for _, o := range []client.Object{old, oldTemplate} {
			Expect(controllerutil.SetControllerReference(wl, o, env.Scheme)).To(Succeed())
			Expect(env.Client.Create(ctx, o)).To(Succeed())
		}
		updateStatus(ctx, wl, func(w *berthv1.Workload) {
			w.Status.Provisioning = &berthv1.ProvisioningStatus{Attempt: 1, State: berthv1.ProvisioningFailed, Failures: 1}
		})

		By("the scheduler reserves quota for rack r1 and asks for a booking")
		p := tc.reserve(ctx, wl, tc.rack("r1"))
		Expect(p.RequestName).To(Equal(wl.Name + "-2"))
		pr := request(ctx, tc.ns, p.RequestName)
		Expect(pr.Spec.ProvisioningClassName).To(Equal(scaleUp))
		Expect(pr.Spec.Parameters).To(Equal(map[string]autoscalingv1.Parameter{"team": "a"}))
		Expect(pr.Spec.PodSets).To(Equal([]autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: p.RequestName + "-main"}, Count: 2}}))
		Expect(metav1.IsControlledBy(pr, wl)).To(BeTrue())
		tmpl := &corev1.PodTemplate{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: p.RequestName + "-main"}, tmpl)).To(Succeed())
		Expect(metav1.IsControlledBy(tmpl, wl)).To(BeTrue())
		Expect(tmpl.CreationTimestamp.Time).NotTo(BeTemporally(">", pr.CreationTimestamp.Time), "the template exists before the request")
		spec := tmpl.Template.Spec
		Expect(spec.NodeSelector).To(Equal(map[string]string{caseLabel: tc.id, rackLabel: "r1"}))
		Expect(spec.Tolerations).To(Equal(tc.flavor.Spec.Tolerations))
		Expect(spec.Containers).To(HaveLen(1))
		Expect(spec.Containers[0].Resources.Requests.Name(gpu, "").String()).To(Equal("8"))
		Expect(spec.Containers[0].Resources.Limits.Name(gpu, "").String()).To(Equal("8"))

		By("the earlier attempt's request and template are deleted")
		expectGone(ctx, old)
		expectGone(ctx, oldTemplate)

		By("the autoscaler provisions; the engine admits the Workload and the Job starts in r1")
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(condition(got, berthv1.ConditionAdmitted).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(got, berthv1.ConditionAdmitted).Reason).To(Equal(string(berthv1.ReasonAdmitted)))
			g.Expect(got.Status.Provisioning.State).To(Equal(berthv1.ProvisioningProvisioned))
			g.Expect(got.Status.Provisioning.Failures).To(BeEquivalentTo(1),
				"podsReadySeconds defaults to 600: only pods Ready in time prove the booking good and reset the failures")
			g.Expect(got.Status.Admission.Provisioning).NotTo(BeNil(), "what was booked stays on record")
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Eventually(func(g Gomega) []corev1.Node {
			nodes := &corev1.NodeList{}
			g.Expect(env.Client.List(ctx, nodes, client.MatchingLabels{caseLabel: tc.id, rackLabel: "r1"})).To(Succeed())
			return nodes.Items
		}).WithTimeout(timeout).WithPolling(interval).Should(HaveLen(2))
		expectJob(ctx, job, func(g Gomega, j *batchv1.Job) {
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			g.Expect(j.Spec.Template.Annotations).To(HaveKeyWithValue(autoscalingv1.ProvisioningRequestPodAnnotationKey, p.RequestName))
			g.Expect(j.Spec.Template.Annotations).To(HaveKeyWithValue(autoscalingv1.ProvisioningClassPodAnnotationKey, scaleUp))
			g.Expect(j.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue(rackLabel, "r1"))
			g.Expect(j.Spec.Template.Labels).To(HaveKeyWithValue(berthv1.WorkloadLabel, string(wl.UID)))
		})
		Eventually(func(g Gomega) []string { return eventReasons(ctx, g, tc.ns, wl.Name) }).WithTimeout(timeout).WithPolling(interval).
			Should(ContainElements(lifecycle.EventRequestCreated, lifecycle.EventProvisioned))
	})

	It("books capacity for the job's own pods: its selector, affinity, tolerations and claims reach the request's template", func(ctx SpecContext) {
		tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded})
		tc.pool(ctx, "r1", 2, nil)
		job := builders.Job(tc.ns, "train", tc.queue).Pods(2).Request(gpu, "8").Obj()
		pod := &job.Spec.Template.Spec
		pod.NodeSelector = map[string]string{"gpu.product": "H200"}
		pod.Tolerations = []corev1.Toleration{{Key: "team-a", Operator: corev1.TolerationOpExists}}
		pod.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "fast", Operator: corev1.NodeSelectorOpExists}}}}}}}
		pod.ResourceClaims = []corev1.PodResourceClaim{{Name: "nic", ResourceClaimTemplateName: ptr.To("rdma")}}
		pod.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", Value: "not-for-the-autoscaler"}}
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		wl := onlyWorkload(ctx, tc.ns)

		p := tc.reserve(ctx, wl, tc.rack("r1"))
		tmpl := &corev1.PodTemplate{}
		Eventually(func() error {
			return env.Client.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: p.RequestName + "-main"}, tmpl)
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		spec := tmpl.Template.Spec
		Expect(spec.NodeSelector).To(Equal(map[string]string{"gpu.product": "H200", caseLabel: tc.id, rackLabel: "r1"}))
		Expect(spec.Tolerations).To(ConsistOf(append([]corev1.Toleration{pod.Tolerations[0]}, tc.flavor.Spec.Tolerations...)))
		Expect(spec.Affinity).To(Equal(pod.Affinity))
		Expect(spec.ResourceClaims).To(Equal(pod.ResourceClaims))
		Expect(spec.Containers).To(HaveLen(1))
		Expect(spec.Containers[0].Name).To(Equal(pod.Containers[0].Name))
		Expect(spec.Containers[0].Image).To(Equal(pod.Containers[0].Image))
		Expect(spec.Containers[0].Env).To(BeEmpty())
		Expect(spec.Containers[0].Resources.Requests.Name(gpu, "").String()).To(Equal("8"))
		Expect(tmpl.Template.Annotations).NotTo(HaveKey(autoscalingv1.ProvisioningRequestPodAnnotationKey))
	})

	It("fails an attempt whose rack has no capacity for capacityNotFoundSeconds, and gives up after maxAttempts", func(ctx SpecContext) {
		tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 2, BackoffSeconds: 5, CapacityNotFoundSeconds: 60})
		tc.pool(ctx, "r1", 2, map[string]string{autoscaler.StockoutAnnotation: "true"})
		_, wl := tc.job(ctx)

		By("attempt 1: the autoscaler finds no capacity and keeps retrying; berth waits the bound")
		p := tc.reserve(ctx, wl, tc.rack("r1"))
		expectNotFoundNoted(ctx, wl)
		Consistently(func(g Gomega) *berthv1.Admission { return workload(ctx, g, wl).Status.Admission }).
			WithTimeout(time.Second).WithPolling(interval).ShouldNot(BeNil())
		step(ctx, wl, 61*time.Second)
		failedAt := berthClock.Now()
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Admission).To(BeNil())
			// The case's queue is stopped (so the spec reserves by hand): once
			// the booking failed, that is what holds the workload, and its
			// condition says so; the failure stays in status.provisioning.
			qr := condition(got, berthv1.ConditionQuotaReserved)
			g.Expect(qr.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(qr.Reason).To(Equal(string(berthv1.ReasonClusterQueueStopped)))
			st := got.Status.Provisioning
			g.Expect(st.Message).To(And(ContainSubstring("rack=r1"), ContainSubstring("found no capacity for 1m"),
				ContainSubstring("1 of 2 attempts failed"), ContainSubstring("next attempt not before")))
			g.Expect(st.State).To(Equal(berthv1.ProvisioningCapacityNotFound))
			g.Expect(st.FailedDomains).To(Equal([]berthv1.TopologyAssignment{*tc.rack("r1")}))
			g.Expect(st.GaveUp).To(BeFalse())
			g.Expect(st.RetryAfter).NotTo(BeNil())
			g.Expect(st.RetryAfter.Time).To(BeTemporally("~", failedAt.Add(5*time.Second), 2*time.Second))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		expectGone(ctx, &autoscalingv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: p.RequestName}})
		expectGone(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: p.RequestName + "-main"}})

		By("attempt 2 finds none either: no attempt left")
		p = tc.reserve(ctx, wl, tc.rack("r1"))
		Expect(p.Attempt).To(Equal(int32(2)))
		Expect(p.Failures).To(Equal(int32(1)))
		expectNotFoundNoted(ctx, wl)
		step(ctx, wl, 61*time.Second)
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Admission).To(BeNil())
			g.Expect(lifecycle.PhaseOf(got)).To(Equal(lifecycle.GaveUp))
			st := got.Status.Provisioning
			g.Expect(st.GaveUp).To(BeTrue())
			g.Expect(st.RetryAfter).To(BeNil())
			g.Expect(st.Message).To(ContainSubstring("delete Workload " + wl.Name))
			g.Expect(condition(got, berthv1.ConditionQuotaReserved).Reason).To(Equal(string(berthv1.ReasonProvisioningGaveUp)))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Eventually(func(g Gomega) []string { return eventReasons(ctx, g, tc.ns, wl.Name) }).WithTimeout(timeout).WithPolling(interval).
			Should(ContainElements(lifecycle.EventRequestCreated, lifecycle.EventProvisioningFailed, lifecycle.EventProvisioningGaveUp))
	})

	It("fails an attempt the autoscaler never answers within answerTimeoutSeconds", func(ctx SpecContext) {
		// The bound counts from the request's creation, which the API server
		// stamps: berth's clock starts from it here.
		berthClock.SetTime(time.Now())
		tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 3, BackoffSeconds: 5, AnswerTimeoutSeconds: 120})
		tc.pool(ctx, "r1", 2, nil)
		_, wl := tc.job(ctx)
		// A class no autoscaler here serves: the request is never answered.
		p := tc.reserveClass(ctx, wl, tc.rack("r1"), "queued-provisioning.gke.io")
		request(ctx, tc.ns, p.RequestName)
		step(ctx, wl, 60*time.Second)
		Consistently(func(g Gomega) *berthv1.Admission { return workload(ctx, g, wl).Status.Admission }).
			WithTimeout(time.Second).WithPolling(interval).ShouldNot(BeNil())
		step(ctx, wl, 61*time.Second)
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Admission).To(BeNil())
			g.Expect(got.Status.Provisioning.State).To(Equal(berthv1.ProvisioningNoAnswer))
			g.Expect(got.Status.Provisioning.Message).To(ContainSubstring("no answer from the autoscaler within 2m0s"))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	})

	It("releases a gang waiting for capacity at once when its queue is drained, and deletes its request", func(ctx SpecContext) {
		tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 3, BackoffSeconds: 5})
		tc.pool(ctx, "r1", 2, map[string]string{autoscaler.StockoutAnnotation: "true"})
		job, wl := tc.job(ctx)
		p := tc.reserve(ctx, wl, tc.rack("r1"))
		request(ctx, tc.ns, p.RequestName)

		cq := &berthv1.ClusterQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: tc.cq}, cq)).To(Succeed())
		cq.Spec.StopPolicy = berthv1.StopPolicyHoldAndDrain
		Expect(env.Client.Update(ctx, cq)).To(Succeed())
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Admission).To(BeNil(), "no pod ran: nothing to wait for")
			g.Expect(condition(got, berthv1.ConditionEvicted).Reason).To(Equal(string(berthv1.ReasonClusterQueueStopped)))
			g.Expect(got.Status.Provisioning.State).To(Equal(berthv1.ProvisioningCancelled))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		expectGone(ctx, &autoscalingv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: p.RequestName}})
		expectJob(ctx, job, func(g Gomega, j *batchv1.Job) { g.Expect(ptr.Deref(j.Spec.Suspend, false)).To(BeTrue()) })
	})
})
