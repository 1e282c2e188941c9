package provisioning_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/provisioning"
	"github.com/berth-dev/berth/test/builders"
)

// squatter plants, as a tenant would, an object under a name berth will
// use for the first booking attempt of wl, and returns the planted object
// as created.
type squatter func(ctx context.Context, ns string, wl *berthv1.Workload) client.Object

// squatRequest plants a ProvisioningRequest of the attempt's name.
func squatRequest(ctx context.Context, ns string, wl *berthv1.Workload) client.Object {
	pr := &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lifecycle.RequestName(wl.Name, 1), Labels: map[string]string{"owner": "tenant"}},
		Spec: autoscalingv1.ProvisioningRequestSpec{
			// No autoscaler here serves the class: nothing but berth could
			// change the request.
			ProvisioningClassName: "tenant.example.com",
			PodSets:               []autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: "tenant-pod"}, Count: 1}},
		},
	}
	Expect(env.Client.Create(ctx, pr)).To(Succeed())
	return pr.DeepCopy()
}

// squatTemplate plants the PodTemplate the attempt's request would name
// for the Workload's first pod set, asking for pods of the tenant's choice.
func squatTemplate(ctx context.Context, ns string, wl *berthv1.Workload) client.Object {
	name := provisioning.TemplateName(lifecycle.RequestName(wl.Name, 1), wl.Spec.PodSets[0].Name)
	t := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"owner": "tenant"}},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "tenant",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{gpu: resource.MustParse("64")},
				Limits:   corev1.ResourceList{gpu: resource.MustParse("64")},
			},
		}}}},
	}
	Expect(env.Client.Create(ctx, t)).To(Succeed())
	return t.DeepCopy()
}

// expectUntouched checks for a while that the planted object is neither
// deleted, re-created, owned nor changed in any way since it was created.
func expectUntouched(ctx context.Context, created client.Object) {
	Consistently(func(g Gomega) {
		got := created.DeepCopyObject().(client.Object)
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(created), got)).To(Succeed())
		g.Expect(got.GetUID()).To(Equal(created.GetUID()))
		g.Expect(got.GetResourceVersion()).To(Equal(created.GetResourceVersion()))
		g.Expect(got.GetDeletionTimestamp()).To(BeNil())
		g.Expect(got.GetOwnerReferences()).To(BeEmpty())
		g.Expect(got.GetLabels()).To(Equal(created.GetLabels()))
	}).WithTimeout(time.Second).WithPolling(interval).Should(Succeed())
}

var _ = Describe("the whole flow with the admission engine", func() {
	BeforeEach(func(ctx SpecContext) { installAPI(ctx) })

	It("books a rack-bound Job's rack, moves to the other rack after a stockout, and starts it there", func(ctx SpecContext) {
		tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 3, BackoffSeconds: 1, CapacityNotFoundSeconds: 30})
		cq := builders.ClusterQueue("open-"+tc.id).Quota(tc.flavor.Name, gpu, "16", "").Obj()
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(tc.ns, "open", cq.Name))).To(Succeed())
		tc.pool(ctx, "r1", 1, map[string]string{autoscaler.StockoutAnnotation: "true"})
		tc.pool(ctx, "r2", 1, nil)

		job := builders.Job(tc.ns, "train", "open").Pods(1).Request(gpu, "8").Obj()
		job.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel}
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		wl := onlyWorkload(ctx, tc.ns)

		By("the first attempt, pinned to r1 (the first of two equal racks), finds no capacity there")
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Provisioning).NotTo(BeNil())
			g.Expect(got.Status.Provisioning.Topology).To(Equal(tc.rack("r1")))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		expectNotFoundNoted(ctx, wl)

		By("after capacityNotFoundSeconds the attempt fails in r1")
		step(ctx, wl, 31*time.Second)
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			g.Expect(got.Status.Provisioning.FailedDomains).To(ContainElement(*tc.rack("r1")))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

		By("after the backoff the next attempt books r2; the stand-in creates its node")
		step(ctx, wl, 2*time.Second)
		var p *berthv1.ProvisioningStatus
		Eventually(func(g Gomega) {
			got := workload(ctx, g, wl)
			p = got.Status.Provisioning
			g.Expect(p.Attempt).To(BeNumerically(">=", 2))
			g.Expect(p.Topology).To(Equal(tc.rack("r2")))
			g.Expect(p.State).To(Equal(berthv1.ProvisioningProvisioned))
			g.Expect(condition(got, berthv1.ConditionAdmitted).Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		tmpl := &corev1.PodTemplate{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: p.RequestName + "-main"}, tmpl)).To(Succeed())
		Expect(tmpl.Template.Spec.NodeSelector).To(HaveKeyWithValue(rackLabel, "r2"))
		nodes := &corev1.NodeList{}
		Expect(env.Client.List(ctx, nodes, client.MatchingLabels{caseLabel: tc.id})).To(Succeed())
		Expect(nodes.Items).To(HaveLen(1))
		Expect(nodes.Items[0].Labels).To(HaveKeyWithValue(rackLabel, "r2"))

		By("the Job starts pinned to r2, consuming the booking")
		expectJob(ctx, job, func(g Gomega, j *batchv1.Job) {
			g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
			g.Expect(j.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue(rackLabel, "r2"))
			g.Expect(j.Spec.Template.Annotations).To(HaveKeyWithValue(autoscalingv1.ProvisioningRequestPodAnnotationKey, p.RequestName))
			g.Expect(j.Spec.Template.Annotations).To(HaveKeyWithValue(autoscalingv1.ProvisioningClassPodAnnotationKey, scaleUp))
		})
	})

	DescribeTable("leaves an object a tenant planted under berth's name alone, warns what to do, and books under another name",
		func(ctx SpecContext, kind string, plant squatter) {
			tc := newCase(ctx, berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 3, BackoffSeconds: 1})
			tc.pool(ctx, "r1", 1, nil)
			tc.pool(ctx, "r2", 1, nil)
			// The Workload's name hashes the Job's UID, which the API server
			// assigns: the tenant can squat the name only once the Job exists,
			// so the queue holds the Job until the squatter is in place.
			cq := builders.ClusterQueue("open-"+tc.id).Quota(tc.flavor.Name, gpu, "16", "").Obj()
			cq.Spec.StopPolicy = berthv1.StopPolicyHold
			Expect(env.Client.Create(ctx, cq)).To(Succeed())
			Expect(env.Client.Create(ctx, builders.LocalQueue(tc.ns, "open", cq.Name))).To(Succeed())
			job := builders.Job(tc.ns, "train", "open").Pods(1).Request(gpu, "8").Obj()
			job.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel}
			Expect(env.Client.Create(ctx, job)).To(Succeed())
			wl := onlyWorkload(ctx, tc.ns)
			Expect(wl.Name).To(Equal(jobs.WorkloadName("Job", job)))

			By("a tenant creates a " + kind + " under the name of berth's first attempt")
			squatted := lifecycle.RequestName(wl.Name, 1)
			created := plant(ctx, tc.ns, wl)
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cq), cq); err != nil {
					return err
				}
				cq.Spec.StopPolicy = berthv1.StopPolicyNone
				return env.Client.Update(ctx, cq)
			})).To(Succeed())

			By("berth's first attempt finds the name taken: a Warning says what to delete, and the attempt fails")
			Eventually(func(g Gomega) {
				got := workload(ctx, g, wl)
				p := got.Status.Provisioning
				g.Expect(p).NotTo(BeNil())
				g.Expect(p.Attempt).To(Equal(int32(1)))
				g.Expect(p.RequestName).To(Equal(squatted))
				g.Expect(p.State).To(Equal(berthv1.ProvisioningFailed))
				g.Expect(p.RetryAfter).NotTo(BeNil())
			}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
			Eventually(func(g Gomega) []corev1.Event { return warnings(ctx, g, tc.ns, wl.Name) }).WithTimeout(timeout).WithPolling(interval).
				Should(ContainElement(And(
					HaveField("Reason", lifecycle.EventRequestSquatted),
					HaveField("Related.Kind", kind),
					HaveField("Related.Name", created.GetName()),
					HaveField("Message", And(ContainSubstring(kind+" "+tc.ns+"/"+created.GetName()), ContainSubstring("delete it"))))))

			By("after the backoff the next attempt books under another name, owned by the Workload, and the Job starts")
			step(ctx, wl, 2*time.Second)
			var p *berthv1.ProvisioningStatus
			Eventually(func(g Gomega) {
				got := workload(ctx, g, wl)
				p = got.Status.Provisioning
				g.Expect(p.Attempt).To(BeNumerically(">=", 2))
				g.Expect(p.RequestName).NotTo(Equal(squatted))
				g.Expect(p.State).To(Equal(berthv1.ProvisioningProvisioned))
				g.Expect(condition(got, berthv1.ConditionAdmitted).Status).To(Equal(metav1.ConditionTrue))
			}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
			own := request(ctx, tc.ns, p.RequestName)
			Expect(metav1.IsControlledBy(own, wl)).To(BeTrue())
			expectJob(ctx, job, func(g Gomega, j *batchv1.Job) {
				g.Expect(ptr.Deref(j.Spec.Suspend, true)).To(BeFalse())
				g.Expect(j.Spec.Template.Annotations).To(HaveKeyWithValue(autoscalingv1.ProvisioningRequestPodAnnotationKey, p.RequestName))
			})

			By("the tenant's " + kind + " is neither deleted nor changed")
			expectUntouched(ctx, created)
		},
		Entry("a ProvisioningRequest", "ProvisioningRequest", squatter(squatRequest)),
		Entry("a PodTemplate, which would have the autoscaler buy the tenant's pods", "PodTemplate", squatter(squatTemplate)),
	)
})
