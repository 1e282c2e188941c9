package burst_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/perf/burst"
)

var _ = Describe("a small burst on the full plane", func() {
	It("binds every gang whole, with kube-scheduler alone and through berth, and reports all three", func(ctx SpecContext) {
		ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
		const gangs = 24
		// Pages of ten: the floor's pods are deleted in several pages
		// before the berth run needs their nodes.
		rep, err := burst.Run(ctx, burst.Options{Gangs: gangs, Window: time.Second, DeletePage: 10, Progress: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		pods := burst.Pods(gangs, 4)
		Expect(rep.Pods).To(Equal(pods))
		Expect(rep.Policy).NotTo(BeNil())
		for _, ph := range []burst.Phase{rep.Floor, rep.Berth, *rep.Policy} {
			Expect(ph.Pods).To(Equal(pods))
			Expect(ph.Complete).To(Equal(gangs), "%s: every gang bound", ph.Namespace)
			Expect(ph.Partial).To(BeZero(), "%s: no gang partly bound", ph.Namespace)
			Expect(ph.P50).To(BeNumerically(">", 0))
			Expect(ph.P95).To(BeNumerically(">=", ph.P50))
			Expect(ph.Max).To(BeNumerically(">=", ph.P95))
		}
		By("every gang of the berth runs went through berth, one admitted Workload each")
		for _, ph := range []burst.Phase{rep.Berth, *rep.Policy} {
			Expect(ph.ThroughBerth).To(BeTrue())
			Expect(ph.Workloads).To(Equal(gangs))
		}
		Expect(rep.Floor.Workloads).To(BeZero())
		Expect(rep.P95Ratio).To(BeNumerically("~", rep.Berth.P95/rep.Floor.P95, 1e-9))
		Expect(rep.PolicyP95Ratio).To(BeNumerically("~", rep.Policy.P95/rep.Floor.P95, 1e-9))
		Expect(rep.Floor.CPUSeconds).To(HaveKey(burst.APIServer))
		Expect(rep.APIServerCPURatio).To(BeNumerically("~", rep.Berth.CPUSeconds[burst.APIServer]/rep.Floor.CPUSeconds[burst.APIServer], 1e-9))
		Expect(rep.PolicyAPIServerCPURatio).To(BeNumerically("~", rep.Policy.CPUSeconds[burst.APIServer]/rep.Floor.CPUSeconds[burst.APIServer], 1e-9))

		By("the webhook path gated every pod by berth's webhook; the policy path called berth for none of them")
		Expect(rep.Berth.WebhookCalls[framework.MutatePodPath]).To(BeNumerically("==", pods))
		Expect(rep.Policy.WebhookCalls).To(BeEmpty())

		By("berth released each pod with one patch and created one Workload per gang, once")
		for _, ph := range []burst.Phase{rep.Berth, *rep.Policy} {
			Expect(ph.BerthWrites).To(HaveKeyWithValue("PATCH pods", pods), "%s: one release per pod", ph.Namespace)
			Expect(ph.BerthWrites).To(HaveKeyWithValue("POST workloads", gangs), "%s: one Workload per gang", ph.Namespace)
			Expect(ph.BerthWrites).NotTo(HaveKey("POST workloads 409"),
				"%s: no Workload created again while berth's cache did not show it yet", ph.Namespace)
		}

		By("writing the report as JSON and as a table")
		path := filepath.Join(GinkgoT().TempDir(), "burst.json")
		Expect(rep.WriteJSON(path)).To(Succeed())
		raw, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		var back burst.Report
		Expect(json.Unmarshal(raw, &back)).To(Succeed())
		Expect(back.Berth).To(Equal(rep.Berth))
		var table bytes.Buffer
		Expect(rep.WriteTable(&table)).To(Succeed())
		Expect(table.String()).To(ContainSubstring("berth, policy path"))
		Expect(table.String()).To(ContainSubstring("kube-apiserver CPU / floor's (per pod)"))
		GinkgoWriter.Println(table.String())
	}, NodeTimeout(10*time.Minute))

	It("binds every replica of Deployments scaled up, and through berth admits each on a record with one write", func(ctx SpecContext) {
		ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
		const gangs = 12
		rep, pods := scaledUp(ctx, gangs, burst.ShapeDeployments)
		Expect(rep.Floor.Records).To(BeZero())

		By("berth admitted every replica on a record on its pod: one patch each, no Workload")
		for _, ph := range []burst.Phase{rep.Berth, *rep.Policy} {
			Expect(ph.Records).To(Equal(pods), "%s: every replica runs on its record", ph.Namespace)
			Expect(ph.Workloads).To(BeZero(), "%s", ph.Namespace)
			Expect(ph.BerthWrites).To(HaveKeyWithValue("PATCH pods", pods), "%s: one release per replica", ph.Namespace)
			Expect(ph.BerthWrites).NotTo(HaveKey("POST workloads"), "%s", ph.Namespace)
			Expect(ph.Stages).To(BeNil(), "%s: no Workload to split a replica's time at", ph.Namespace)
		}
		Expect(table(rep)).To(ContainSubstring("as Deployments scaled up"))
	}, NodeTimeout(10*time.Minute))

	It("binds every replica of LeaderWorkerSets scaled up whole, through berth one admitted Workload per replica", func(ctx SpecContext) {
		ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
		const gangs = 12
		rep, pods := scaledUp(ctx, gangs, burst.ShapeLeaderWorkerSets)

		By("berth admitted each replica as one gang: a Workload, its admission and one release per pod")
		for _, ph := range []burst.Phase{rep.Berth, *rep.Policy} {
			Expect(ph.Workloads).To(Equal(gangs), "%s", ph.Namespace)
			Expect(ph.BerthWrites).To(HaveKeyWithValue("PATCH pods", pods), "%s: one release per pod", ph.Namespace)
			Expect(ph.BerthWrites).To(HaveKeyWithValue("POST workloads", gangs), "%s: one Workload per replica", ph.Namespace)
		}
		Expect(table(rep)).To(ContainSubstring("as LeaderWorkerSet replicas scaled up"))
	}, NodeTimeout(framework.OperatorPlaneTimeout))
})

// scaledUp runs a small burst of gangs of shape, which
// kube-controller-manager's controllers create the pods of, and checks
// what holds for every such shape: every gang bound whole in every run,
// and the webhook path calling berth once per pod, for its gate, and the
// policy path never — the pods' controllers are followed at their
// release, not looked up at their creation. It returns the report and the
// number of pods.
func scaledUp(ctx SpecContext, gangs int, shape burst.Shape) (*burst.Report, int) {
	GinkgoHelper()
	rep, err := burst.Run(ctx, burst.Options{Gangs: gangs, Window: time.Second, DeletePage: 10, Shape: shape, Progress: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	pods := burst.Pods(gangs, 4)
	Expect(rep.Shape).To(Equal(shape))
	Expect(rep.Policy).NotTo(BeNil())
	for _, ph := range []burst.Phase{rep.Floor, rep.Berth, *rep.Policy} {
		Expect(ph.Complete).To(Equal(gangs), "%s: every gang's pods bound", ph.Namespace)
		Expect(ph.Partial).To(BeZero(), "%s: no gang partly bound", ph.Namespace)
		Expect(ph.P95).To(BeNumerically(">=", ph.P50))
	}
	By("the webhook path called berth once per pod, to gate it; the policy path never")
	Expect(rep.Berth.WebhookCalls).To(HaveKeyWithValue(framework.MutatePodPath, BeNumerically("==", pods)))
	Expect(rep.Berth.WebhookCalls).To(HaveLen(1), "no other call: %v", rep.Berth.WebhookCalls)
	Expect(rep.Policy.WebhookCalls).To(BeEmpty())
	return rep, pods
}

// table is the report's table, also written to the spec's output.
func table(rep *burst.Report) string {
	GinkgoHelper()
	var out bytes.Buffer
	Expect(rep.WriteTable(&out)).To(Succeed())
	GinkgoWriter.Println(out.String())
	return out.String()
}
