package notify_test

import (
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
)

// settleAndMore is longer than the notifier's settle time (5 s) plus a
// tick: what was not sent by then is not going to be.
const settleAndMore = 8 * time.Second

var _ = Describe("failure notifications", func() {
	It("reports 3 of 4 pods OOM-killed in one Slack message that names the gang and its idle GPUs", func(ctx SpecContext) {
		ns := team(ctx)
		slackPolicy(ctx, ns, "/"+ns, 300)
		slack := sinks.Headlines("/" + ns)
		pods := runningGang(ctx, ns, "train-x", 4)

		for _, p := range pods[:3] {
			oomKill(ctx, p)
		}
		Eventually(slack, timeout, interval).Should(HaveLen(1))
		Consistently(slack, settleAndMore, interval).Should(HaveLen(1), "siblings failing together are one message")
		Expect(slack()[0]).To(Equal("3 of 4 pods of Job " + ns + "/train-x were OOM-killed: OOMKilled"))
		msg := sinks.Posts("/" + ns)[0].Body
		for _, want := range []string{
			`*Queue*\nteam → ` + ns, `*Flavor*\n` + ns, `*Affected*\n3 of 4 pods`,
			`*Idle GPUs*\n2, on the 1 pod that waits for the rest of the gang`, "exit code 137",
			"kubectl berth explain job/train-x -n " + ns,
		} {
			Expect(msg).To(ContainSubstring(want))
		}
		Expect(msg).NotTo(ContainSubstring("SECRET"), "the webhook URL is never in a message")
	})

	It("folds failures inside the dedup window into one later report", func(ctx SpecContext) {
		ns := team(ctx)
		slackPolicy(ctx, ns, "/"+ns, 30)
		slack := sinks.Headlines("/" + ns)
		pods := runningGang(ctx, ns, "train-y", 4)

		oomKill(ctx, pods[0])
		Eventually(slack, timeout, interval).Should(HaveLen(1))
		oomKill(ctx, pods[1])
		oomKill(ctx, pods[2])
		oomKill(ctx, pods[1]) // again: a repeat, not another pod
		Eventually(slack, timeout, interval).Should(HaveLen(2))
		posts := sinks.Posts("/" + ns)
		// The window runs from when the first report was taken to be sent;
		// its post may have left a few milliseconds after that.
		Expect(posts[1].At.Sub(posts[0].At)).To(BeNumerically(">=", 29*time.Second), "not before the window has passed")
		Expect(slack()[1]).To(HavePrefix("2 of 4 pods of Job " + ns + "/train-y were OOM-killed"))
		Expect(sinks.Posts("/" + ns)[1].Body).To(ContainSubstring("(1 repeats folded in)"))
	})

	It("reports to a tenant's policy only its own namespace's gangs", func(ctx SpecContext) {
		nsA, nsB := team(ctx), team(ctx)
		slackPolicy(ctx, nsA, "/"+nsA, 300)
		slackPolicy(ctx, nsB, "/"+nsB, 300)
		pods := runningGang(ctx, nsA, "train-a", 2)

		terminate(ctx, pods[0], corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1},
			&corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"})
		Eventually(sinks.Headlines("/"+nsA), timeout, interval).Should(ConsistOf(
			"1 of 2 pods of Job "+nsA+"/train-a restarted: Error",
			"1 of 2 pods of Job "+nsA+"/train-a are crash-looping: CrashLoopBackOff"))
		Consistently(sinks.Headlines("/"+nsB), settleAndMore, interval).Should(BeEmpty(), "another namespace's policy sees nothing of it")
	})

	It("reports berth's own eviction of a gang and its requeue", func(ctx SpecContext) {
		ns := team(ctx)
		slackPolicy(ctx, ns, "/"+ns, 30, "Evicted", "Requeued")
		slack := sinks.Headlines("/" + ns)
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}, Value: 1000}
		Expect(env.Client.Create(ctx, pc)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, pc))).To(Succeed()) })
		pods := runningGang(ctx, ns, "low", 4)

		runningGangAsync(ctx, ns, "high", pc.Name)
		Eventually(slack, timeout, interval).Should(ContainElement("Job " + ns + "/low evicted: Preempted"))
		for _, p := range pods {
			// The Job controller would, once berth suspends the Job; with no
			// kubelet to confirm, the pod goes at once.
			Expect(env.Client.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
		}
		Eventually(slack, 2*timeout, interval).Should(ContainElement("Job " + ns + "/low requeued: Requeued"))
	})

	It("keeps admitting while a sink fails, and counts what it gave up on", func(ctx SpecContext) {
		ns := team(ctx)
		sinks.Answer("/"+ns, http.StatusServiceUnavailable)
		slackPolicy(ctx, ns, "/"+ns, 30)
		pods := runningGang(ctx, ns, "train-z", 2)
		oomKill(ctx, pods[0])
		failed := env.Berth().Metrics.NotificationsTotal.WithLabelValues("slack", metrics.NotificationFailed)
		before := testutil.ToFloat64(failed)
		// The next gang is admitted while the sink refuses every post.
		runningGang(ctx, ns, "next", 2)
		Eventually(func() float64 { return testutil.ToFloat64(failed) - before }, timeout, interval).Should(BeEquivalentTo(1))
		Expect(sinks.Posts("/" + ns)).To(BeEmpty())
	})

	It("reports a pod of an admitted gang left unscheduled, with the scheduler's message", func(ctx SpecContext) {
		ns := team(ctx)
		slackPolicy(ctx, ns, "/"+ns, 300, "Unschedulable")
		pods := runningGang(ctx, ns, "stuck", 2)
		// One pod was never bound: as kube-scheduler leaves it, asking
		// since ten minutes ago. It stands in for the second running pod
		// (berth refuses a third pod of a gang admitted for two).
		Expect(env.Client.Delete(ctx, pods[1].DeepCopy(), client.GracePeriodSeconds(0))).To(Succeed())
		stuck := pods[1].DeepCopy()
		stuck.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "stuck-waiting", Labels: pods[1].Labels, OwnerReferences: pods[1].OwnerReferences}
		stuck.Spec.NodeName = ""
		stuck.Status = corev1.PodStatus{}
		// berth counts a pod it let in for a moment after its create unless
		// the API server lists it (the deleted one never was, since): the
		// Job controller retries a refused create, and so does this.
		Eventually(func() error { return env.Client.Create(ctx, stuck.DeepCopy()) }, timeout, interval).Should(Succeed())
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stuck), stuck)).To(Succeed())
		stuck.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message:            "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
			LastTransitionTime: metav1.NewTime(time.Now().Add(-10 * time.Minute)),
		}}}
		Expect(env.Client.Status().Update(ctx, stuck)).To(Succeed())
		Eventually(sinks.Headlines("/"+ns), timeout, interval).Should(ConsistOf(
			"1 of 2 pods of Job " + ns + "/stuck are not scheduled: Unschedulable"))
		Expect(sinks.Posts("/" + ns)[0].Body).To(ContainSubstring("0/8 nodes are available: 8 Insufficient nvidia.com/gpu."))
		Consistently(sinks.Headlines("/"+ns), settleAndMore, interval).Should(HaveLen(1), "reported once")
	})

	DescribeTable("says in its Ready condition why a policy cannot be used, without quoting the URL",
		func(ctx SpecContext, secret map[string]string, reason, message string) {
			ns := team(ctx)
			if secret != nil {
				Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
					StringData: secret})).To(Succeed())
			}
			np := &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"},
				Spec: berthv1.NotificationPolicySpec{NotificationSettings: berthv1.NotificationSettings{
					Sink: berthv1.NotificationSink{Type: berthv1.SinkWebhook, URLSecretRef: &berthv1.SecretKeyRef{Name: "hook"}}}}}
			Expect(env.Client.Create(ctx, np)).To(Succeed())
			Eventually(func(g Gomega) {
				fresh := &berthv1.NotificationPolicy{}
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(np), fresh)).To(Succeed())
				c := meta.FindStatusCondition(fresh.Status.Conditions, berthv1.ConditionReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(reason))
				g.Expect(c.Message).To(ContainSubstring(message))
				g.Expect(strings.Contains(c.Message, "SECRET")).To(BeFalse(), "the URL is never quoted")
			}, timeout, interval).Should(Succeed())
		},
		Entry("no Secret", nil, berthv1.ReasonSecretNotReadable, "does not exist: create it with the URL under key \"url\""),
		Entry("no such key", map[string]string{"address": "https://example.com/SECRET"}, berthv1.ReasonSecretNotReadable, `has no key "url"`),
		Entry("not https", map[string]string{"url": "http://example.com/SECRET"}, berthv1.ReasonInvalidURL, "is not an https:// URL"),
	)

	It("refuses a Slack sink without a Secret at the API server", func(ctx SpecContext) {
		ns := team(ctx)
		np := &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-url"},
			Spec: berthv1.NotificationPolicySpec{NotificationSettings: berthv1.NotificationSettings{
				Sink: berthv1.NotificationSink{Type: berthv1.SinkSlack}}}}
		err := env.Client.Create(ctx, np)
		Expect(err).To(MatchError(ContainSubstring("a Slack or Webhook sink needs urlSecretRef")))
	})
})
