package bypass_test

import (
	"context"
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
)

// sinkOf gives ns a NotificationPolicy of type t (the platform's: edit
// does not grant NotificationPolicies) whose URL the tenant writes into
// its own Secret "sink" with mallory's client.
func sinkOf(ctx context.Context, mallory client.Client, ns string, t berthv1.NotificationSinkType, url string) *berthv1.NotificationPolicy {
	Expect(mallory.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sink"},
		StringData: map[string]string{"url": url}})).To(Succeed())
	np := &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sink"},
		Spec: berthv1.NotificationPolicySpec{NotificationSettings: berthv1.NotificationSettings{
			DedupWindowSeconds: 300, MaxReportsPerHour: 60,
			Sink: berthv1.NotificationSink{Type: t, URLSecretRef: &berthv1.SecretKeyRef{Name: "sink"}},
		}}}
	Expect(env.Client.Create(ctx, np)).To(Succeed())
	return np
}

// policyCondition polls the policy's condition of type t.
func policyCondition(ctx context.Context, np *berthv1.NotificationPolicy, t string) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		got := &berthv1.NotificationPolicy{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(np), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, t)
		g.Expect(c).NotTo(BeNil(), "condition %s of %s", t, np.Name)
		return c
	}
}

// failingJob has mallory submit a one-pod Job "oom" that kwok OOM-kills: a
// report for the namespace's policies.
func failingJob(ctx context.Context, mallory client.Client, ns string) {
	annotations := controlplane.RunFor(time.Hour)
	for k, v := range controlplane.Terminate("OOMKilled", time.Second) {
		annotations[k] = v
	}
	job := gpuJob(ns, "oom")
	job.Spec.Template.Annotations = annotations
	Expect(mallory.Create(ctx, job)).To(Succeed())
}

var _ = Describe("a tenant aiming berth's notifications", func() {
	It("cannot make berth connect to an internal address", func(ctx SpecContext) {
		// An address of the loopback block the suite does not allow, where
		// something listens: berth must not even connect.
		inside, err := framework.NewConnRecorder("127.0.0.2:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(inside.Close)
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		np := sinkOf(ctx, mallory, ns, berthv1.SinkWebhook, "https://"+inside.Addr()+"/latest/meta-data")
		Eventually(policyCondition(ctx, np, berthv1.ConditionReady), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", berthv1.ReasonEgressRefused),
			HaveField("Message", ContainSubstring("berth does not connect to a loopback address"))))
		failingJob(ctx, mallory, ns)
		Consistently(inside.Connections, settle, interval).Should(BeZero())
	})

	It("cannot redirect berth's post to another address", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		moved, stolen := "/"+ns+"/moved", "/"+ns+"/stolen"
		slack.Redirect(moved, slack.URL(stolen))
		np := sinkOf(ctx, mallory, ns, berthv1.SinkWebhook, slack.URL(moved))
		Eventually(policyCondition(ctx, np, berthv1.ConditionReady), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		failingJob(ctx, mallory, ns)
		Eventually(policyCondition(ctx, np, berthv1.ConditionDelivered), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", berthv1.ReasonSinkRedirected)))
		Expect(slack.Hits(moved)).To(BeNumerically(">", 0), "berth posted to the sink")
		Consistently(func() int { return slack.Hits(stolen) }, settle, interval).Should(BeZero(), "and followed no redirect")
	})

	It("cannot point a Slack sink at another host", func(ctx SpecContext) {
		ns := newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		// The stand-in's address is allowed, but only under the host name
		// an admin gave as Slack's.
		u, err := url.Parse(slack.URL("/" + ns))
		Expect(err).NotTo(HaveOccurred())
		u.Host = "localhost:" + u.Port()
		np := sinkOf(ctx, mallory, ns, berthv1.SinkSlack, u.String())
		Eventually(policyCondition(ctx, np, berthv1.ConditionReady), timeout, interval).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", berthv1.ReasonInvalidURL),
			HaveField("Message", ContainSubstring("is not a Slack incoming-webhook URL"))))
		failingJob(ctx, mallory, ns)
		Consistently(func() int { return slack.Hits("/" + ns) }, settle, interval).Should(BeZero())
	})

	It("cannot stall another tenant's notifications with a sink that hangs", func(ctx SpecContext) {
		nsA, nsB := newTeam(ctx, "4"), newTeam(ctx, "4")
		malloryA, malloryB := editor(ctx, nsA), editor(ctx, nsB)
		slack.Stall("/" + nsA)
		DeferCleanup(slack.Release)
		sinkOf(ctx, malloryA, nsA, berthv1.SinkWebhook, slack.URL("/"+nsA))
		sinkOf(ctx, malloryB, nsB, berthv1.SinkWebhook, slack.URL("/"+nsB))
		failingJob(ctx, malloryA, nsA)
		Eventually(slack.Stalled, timeout, interval).Should(BeNumerically(">", 0), "berth is stuck posting the first tenant's report")
		failingJob(ctx, malloryB, nsB)
		Eventually(slack.Headlines("/"+nsB), timeout, interval).Should(ContainElement(ContainSubstring(nsB+"/oom")),
			"the other tenant's report arrives while the first sink hangs")
		Expect(slack.Posts("/" + nsA)).To(BeEmpty())
	})
})

// What berth writes where a tenant reads it — its Workloads' conditions,
// its jobs' events — names no workload of another namespace.
var _ = Describe("a tenant with the edit role whose job another team preempts", func() {
	It("reads on its Workload and its job that it was preempted, not by whom", func(ctx SpecContext) {
		ns, other := newTeam(ctx, "4"), newTeam(ctx, "4")
		mallory := editor(ctx, ns)
		cohort := "cohort-" + ns
		Expect(update(ctx, env.Client, &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			func(cq *berthv1.ClusterQueue) { cq.Spec.Cohort = cohort })).To(Succeed())
		// The lender shares the tenant's flavor, so that the tenant may
		// borrow its quota, and takes it back from any borrower. Its name,
		// a ClusterQueue's, is the platform's and may be shown.
		lender := builders.ClusterQueue("lender-"+ns).Cohort(cohort).Quota(ns, builders.GPU, "4", "").
			Namespaces(&metav1.LabelSelector{MatchLabels: map[string]string{"team": other}}).Obj()
		lender.Spec.Preemption.ReclaimWithinCohort = berthv1.PreemptAny
		Expect(env.Client.Create(ctx, lender)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, lender))).To(Succeed())
		})
		Expect(env.Client.Create(ctx, builders.LocalQueue(other, "lender", lender.Name))).To(Succeed())

		borrower := builders.Job(ns, "borrower", queue).Pods(2).Request(builders.GPU, "4").Obj()
		Expect(mallory.Create(ctx, borrower)).To(Succeed())
		admittedUID(ctx, ns, string(borrower.UID))
		reclaimer := builders.Job(other, "secret-project", "lender").Request(builders.GPU, "4").Obj()
		Expect(env.Client.Create(ctx, reclaimer)).To(Succeed())

		Eventually(func(g Gomega) {
			wls := &berthv1.WorkloadList{}
			g.Expect(mallory.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
			g.Expect(wls.Items).To(HaveLen(1))
			g.Expect(wls.Items[0].Status.Conditions).To(ContainElement(And(HaveField("Type", berthv1.ConditionEvicted),
				HaveField("Message", ContainSubstring("preempted to admit "+admission.Redacted)))))
			for _, c := range wls.Items[0].Status.Conditions {
				g.Expect(c.Message).NotTo(Or(ContainSubstring(other), ContainSubstring("secret-project")), "condition %s", c.Type)
			}
			stopped := events(ctx, g, ns, borrower.Name)
			g.Expect(stopped).To(ContainElement(And(HavePrefix("Stopped:"), ContainSubstring(admission.Redacted))))
			g.Expect(stopped).NotTo(ContainElement(Or(ContainSubstring(other), ContainSubstring("secret-project"))))
		}, timeout, interval).Should(Succeed())
	})
})
