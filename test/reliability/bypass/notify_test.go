package bypass_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/jobsuite"
)

// settle is longer than the notifier's settle time plus a tick: a message
// not sent by then is not coming.
const settle = 10 * time.Second

// team creates a namespace as newTeam does, with a ClusterQueue of 16
// GPUs, and a NotificationPolicy posting to the stand-in under path
// /<namespace> with the given rate; it returns the namespace.
func team(ctx context.Context, perHour int32) string {
	ns := newTeam(ctx, "16")
	Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slack"},
		StringData: map[string]string{"url": slack.URL("/" + ns)}})).To(Succeed())
	np := &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"},
		Spec: berthv1.NotificationPolicySpec{NotificationSettings: berthv1.NotificationSettings{
			DedupWindowSeconds: 300, MaxReportsPerHour: perHour,
			Sink: berthv1.NotificationSink{Type: berthv1.SinkSlack, URLSecretRef: &berthv1.SecretKeyRef{Name: "slack"}},
		}}}
	Expect(env.Client.Create(ctx, np)).To(Succeed())
	return ns
}

// faultyJob submits a Job of pods 2-GPU pods with the fault annotations,
// running for an hour otherwise.
func faultyJob(ctx context.Context, ns, name string, pods int32, fault map[string]string) {
	annotations := controlplane.RunFor(time.Hour)
	for k, v := range fault {
		annotations[k] = v
	}
	job := builders.Job(ns, name, queue).Pods(pods).Request(builders.GPU, "2").PodAnnotations(annotations).Obj()
	Expect(env.Client.Create(ctx, job)).To(Succeed())
}

var _ = Describe("failure notifications of gangs on the full plane", func() {
	It("reports a gang whose pods kwok OOM-kills in one message, with the pods' nodes and events", func(ctx SpecContext) {
		ns := team(ctx, 60)
		faultyJob(ctx, ns, "train", 4, controlplane.Terminate("OOMKilled", 2*time.Second))
		msgs := slack.Headlines("/" + ns)
		Eventually(msgs, timeout, interval).Should(HaveLen(1))
		Consistently(msgs, settle, interval).Should(HaveLen(1), "four pods failing together are one message")
		Expect(msgs()[0]).To(Equal("4 of 4 pods of Job " + ns + "/train were OOM-killed: OOMKilled"))
		m := slack.Posts("/" + ns)[0].Body
		Expect(m).To(ContainSubstring("exit code 137"))
		Expect(m).To(MatchRegexp(`on .h200-[01].`), "the node each pod ran on")
		Expect(m).To(ContainSubstring("BackOff: Back-off restarting failed container"), "the pod's events")
	})

	It("reports a crash loop after the restart that started it", func(ctx SpecContext) {
		ns := team(ctx, 60)
		faultyJob(ctx, ns, "serve", 2, controlplane.CrashLoop(2*time.Second))
		Eventually(slack.Headlines("/"+ns), timeout, interval).Should(
			ContainElement("2 of 2 pods of Job " + ns + "/serve are crash-looping: CrashLoopBackOff"))
	})

	It("sends no more than a policy's rate, and counts what it drops", func(ctx SpecContext) {
		ns := team(ctx, 1)
		dropped := env.Berth().Metrics.NotificationsTotal.WithLabelValues("slack", metrics.NotificationDropped)
		before := testutil.ToFloat64(dropped)
		faultyJob(ctx, ns, "a", 1, controlplane.Terminate("Error", time.Second))
		faultyJob(ctx, ns, "b", 1, controlplane.Terminate("Error", time.Second))
		msgs := slack.Headlines("/" + ns)
		Eventually(msgs, timeout, interval).Should(HaveLen(1))
		Eventually(func() float64 { return testutil.ToFloat64(dropped) - before }, timeout, interval).Should(BeEquivalentTo(1))
		Consistently(msgs, settle, interval).Should(HaveLen(1))
	})

	It("tells one tenant nothing of another's gangs", func(ctx SpecContext) {
		nsA, nsB := team(ctx, 60), team(ctx, 60)
		faultyJob(ctx, nsA, "train", 1, controlplane.Terminate("OOMKilled", time.Second))
		Eventually(slack.Headlines("/"+nsA), timeout, interval).Should(HaveLen(1))
		Consistently(slack.Headlines("/"+nsB), settle, interval).Should(BeEmpty())
	})

	It("keeps admitting and running jobs while the sink hangs", func(ctx SpecContext) {
		ns := team(ctx, 60)
		slack.Stall()
		DeferCleanup(slack.Release)
		faultyJob(ctx, ns, "failing", 1, controlplane.Terminate("OOMKilled", time.Second))
		Eventually(slack.Stalled, timeout, interval).Should(BeNumerically(">", 0), "berth is stuck posting the report")
		for _, name := range []string{"one", "two", "three"} {
			job := builders.Job(ns, name, queue).Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(time.Second)).Obj()
			Expect(env.Client.Create(ctx, job)).To(Succeed())
			Eventually(jobsuite.Completed(ctx, env.Client, job), timeout, interval).Should(BeTrue(), "%s is admitted and runs while the sink hangs", name)
		}
	})
})
