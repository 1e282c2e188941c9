package bypass_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
)

// Headroom keeps nodes running, which costs money: a tenant with the edit
// role may neither keep any nor enlarge what the platform keeps for it
// beyond its queue's quota.
var _ = Describe("a tenant with the edit role and warm headroom", func() {
	It("creates no HeadroomPolicy, writes none's status, and cannot grow one beyond its queue's quota", func(ctx SpecContext) {
		ns := newTeam(ctx, "2")
		mallory := editor(ctx, ns)
		d := builders.Deployment(ns, "api", queue, 1, "1")
		Expect(mallory.Create(ctx, d)).To(Succeed())
		policy := func() *berthv1.HeadroomPolicy {
			return &berthv1.HeadroomPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}, Spec: berthv1.HeadroomPolicySpec{
				TargetRef: berthv1.HeadroomTarget{Kind: "Deployment", Name: "api"},
				Sizing:    berthv1.HeadroomSizing{Mode: berthv1.HeadroomFixed, Replicas: ptr.To[int32](10)}}}
		}

		By("creating a policy of its own: forbidden")
		err := mallory.Create(ctx, policy())
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a tenant created a HeadroomPolicy: %v", err)

		By("the platform's policy of 10 replicas is kept within the queue's 2 GPUs: one more 1-GPU replica")
		Expect(env.Client.Create(ctx, policy())).To(Succeed())
		desired := func(g Gomega) int32 {
			var hp berthv1.HeadroomPolicy
			g.Expect(mallory.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, &hp)).To(Succeed(), "the tenant may read the policy")
			return hp.Status.DesiredReplicas
		}
		Eventually(desired, timeout, interval).Should(BeEquivalentTo(1))

		By("writing the policy's status or spec: forbidden")
		var hp berthv1.HeadroomPolicy
		Expect(mallory.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, &hp)).To(Succeed())
		hp.Status.DesiredReplicas = 50
		Expect(apierrors.IsForbidden(mallory.Status().Update(ctx, &hp))).To(BeTrue())
		hp.Spec.Sizing.Replicas = ptr.To[int32](100)
		Expect(apierrors.IsForbidden(mallory.Update(ctx, &hp))).To(BeTrue())

		By("doubling the replica's requests: the quota then holds no replica more, and none is kept")
		Eventually(func(g Gomega) {
			var fresh appsv1.Deployment
			g.Expect(mallory.Get(ctx, client.ObjectKeyFromObject(d), &fresh)).To(Succeed())
			c := &fresh.Spec.Template.Spec.Containers[0]
			c.Resources.Requests = corev1.ResourceList{builders.GPU: resource.MustParse("2")}
			c.Resources.Limits = corev1.ResourceList{builders.GPU: resource.MustParse("2")}
			g.Expect(mallory.Update(ctx, &fresh)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Eventually(desired, timeout, interval).Should(BeZero())
		DeferCleanup(func(ctx context.Context) error {
			return client.IgnoreNotFound(env.Client.Delete(ctx, &berthv1.HeadroomPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}}))
		})
	})
})

// Headroom placeholders' room counts as free for the replicas that preempt
// them. A tenant who puts the placeholder label on pods of their own must
// not make berth count a full node as free, or berth would pin another
// team's gang to a node where it can never run.
var _ = Describe("a tenant with the edit role who labels pods as headroom placeholders", func() {
	It("does not make berth count the nodes those pods fill as free for another team", func(ctx SpecContext) {
		victim := newTeam(ctx, "8")
		Expect(update(ctx, env.Client, &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: victim}}, func(rf *berthv1.ResourceFlavor) {
			rf.Spec.TopologyLevels = []string{corev1.LabelHostname}
		})).To(Succeed())
		attacker := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-bypass-placeholder-"}}
		Expect(env.Client.Create(ctx, attacker)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.CleanNamespace(ctx, attacker.Name, framework.CleanOptions{Timeout: timeout})).To(Succeed())
		}, NodeTimeout(2*timeout))
		mallory := editor(ctx, attacker.Name)

		By("filling both nodes with 8-GPU pods labelled as berth's placeholders, in the tenant's own namespace")
		var fakes []*corev1.Pod
		for _, node := range []string{"h200-0", "h200-1"} {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.Name, Name: "fake-" + node,
				Labels: map[string]string{berthv1.HeadroomPlaceholderLabel: "headroom-0123456789abcdef"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: node},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "main", Image: "registry.invalid/pause:latest", Resources: gpuRequests("8")}}}}
			Expect(mallory.Create(ctx, p)).To(Succeed())
			fakes = append(fakes, p)
		}
		bound(ctx, fakes...)

		By("another team's 4-GPU job that must run on one host is not admitted onto the full nodes")
		job := gpuJob(victim, "one-host")
		job.Annotations = map[string]string{berthv1.TopologyRequiredAnnotation: corev1.LabelHostname}
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		admitted := func(g Gomega) bool {
			return lifecycle.MayRun(lifecycle.PhaseOf(workloadOf(ctx, g, victim, string(job.UID))))
		}
		Eventually(func(g Gomega) { workloadOf(ctx, g, victim, string(job.UID)) }, timeout, interval).Should(Succeed())
		Consistently(admitted, quiet, interval).Should(BeFalse(), "berth counted the tenant's fake placeholders as free")

		By("once the tenant's pods are gone, the job is admitted and its pod runs")
		for _, p := range fakes {
			Expect(mallory.Delete(ctx, p)).To(Succeed())
		}
		Eventually(admitted, timeout, interval).Should(BeTrue())
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(env.Client.List(ctx, pods, client.InNamespace(victim), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Spec.NodeName).NotTo(BeEmpty())
		}, timeout, interval).Should(Succeed())
	})
})

// A queue's headroom nodes carry the taint berth.dev/headroom=<queue>, so
// that only its own replicas run there. A tenant writes their pods'
// tolerations: berth holds any queued job that tolerates another queue's
// headroom taint, or every queue's, and says what to fix.
var _ = Describe("a tenant with the edit role who tolerates another queue's headroom taint", func() {
	It("gets no job admitted that could take another queue's headroom nodes", func(ctx SpecContext) {
		ns := newTeam(ctx, "8")
		mallory := editor(ctx, ns)
		tolerating := func(name string, tol corev1.Toleration) *batchv1.Job {
			job := gpuJob(ns, name)
			job.Spec.Template.Spec.Tolerations = []corev1.Toleration{tol}
			Expect(mallory.Create(ctx, job)).To(Succeed())
			return job
		}
		held := func(job *batchv1.Job, message string) {
			Eventually(func(g Gomega) {
				wl := workloadOf(ctx, g, ns, string(job.UID))
				g.Expect(wl.Status.Admission).To(BeNil())
				g.Expect(wl.Status.Conditions).To(ContainElement(And(HaveField("Type", berthv1.ConditionQuotaReserved),
					HaveField("Reason", string(berthv1.ReasonHeadroomNotAllowed)), HaveField("Message", ContainSubstring(message)))))
			}, timeout, interval).Should(Succeed())
		}

		By("tolerating the serving queue's headroom taint")
		other := tolerating("other", corev1.Toleration{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual, Value: "serving",
			Effect: corev1.TaintEffectNoSchedule})
		held(other, `tolerate the taint berth.dev/headroom=serving, which keeps ClusterQueue "serving"'s headroom nodes for its own replicas`)

		By("tolerating every queue's, by the key alone and by no key")
		byKey := tolerating("by-key", corev1.Toleration{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpExists})
		held(byKey, "whatever its value")
		everything := tolerating("everything", corev1.Toleration{Operator: corev1.TolerationOpExists})
		held(everything, "may tolerate only berth.dev/headroom="+ns)
		expectNoPodOutsideQuota(ctx, ns)

		By("tolerating its own queue's headroom taint: admitted, and its pod runs")
		own := tolerating("own", corev1.Toleration{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpEqual, Value: ns,
			Effect: corev1.TaintEffectNoSchedule})
		Eventually(func(g Gomega) {
			g.Expect(lifecycle.MayRun(lifecycle.PhaseOf(workloadOf(ctx, g, ns, string(own.UID))))).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		for _, job := range []*batchv1.Job{other, byKey, everything} {
			Expect(workloadOf(ctx, Default, ns, string(job.UID)).Status.Admission).To(BeNil(), "job %s", job.Name)
		}
	})
})
