package notify_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
)

// quiet is longer than the notifier's settle time plus a tick: a message
// not sent by then is not coming.
const quiet = 10 * time.Second

var _ = Describe("failure notifications of gangs on the full plane", func() {
	It("reports a gang whose pods kwok OOM-kills in one message, with the pods' nodes and events", func(ctx SpecContext) {
		ns := team(ctx, 60)
		faultyJob(ctx, ns, "train", 4, controlplane.Terminate("OOMKilled", 2*time.Second))
		msgs := slack.Headlines("/" + ns)
		Eventually(msgs, timeout, interval).Should(HaveLen(1))
		Consistently(msgs, quiet, interval).Should(HaveLen(1), "four pods failing together are one message")
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
		Consistently(msgs, quiet, interval).Should(HaveLen(1))
	})

	It("tells one tenant nothing of another's gangs", func(ctx SpecContext) {
		nsA, nsB := team(ctx, 60), team(ctx, 60)
		faultyJob(ctx, nsA, "train", 1, controlplane.Terminate("OOMKilled", time.Second))
		Eventually(slack.Headlines("/"+nsA), timeout, interval).Should(HaveLen(1))
		Consistently(slack.Headlines("/"+nsB), quiet, interval).Should(BeEmpty())
	})

	It("keeps admitting and running jobs while the sink hangs", func(ctx SpecContext) {
		ns := team(ctx, 60)
		slack.Stall()
		DeferCleanup(slack.Release)
		faultyJob(ctx, ns, "failing", 1, controlplane.Terminate("OOMKilled", time.Second))
		Eventually(slack.Stalled, timeout, interval).Should(BeNumerically(">", 0), "berth is stuck posting the report")
		for _, name := range []string{"one", "two", "three"} {
			job := builders.Job(ns, name, "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(time.Second)).Obj()
			Expect(env.Client.Create(ctx, job)).To(Succeed())
			Eventually(complete(ctx, job), timeout, interval).Should(BeTrue(), "%s is admitted and runs while the sink hangs", name)
		}
	})
})
