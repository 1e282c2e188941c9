package faults_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/faultproxy"
	"github.com/berth-dev/berth/test/oracle"
	"github.com/berth-dev/berth/test/scale"
)

// faultJobs is how many Jobs each API-fault spec runs (80 at full scale,
// 32 in `make test`); quota for a quarter of the nodes keeps most of them
// queued while the faults are on.
var faultJobs = scale.Pick(32, 80)

// startFaulted creates namespace ns watched by the oracle, and one berth
// replica that talks to the API server through a fault proxy injecting
// faults; all stop when the spec ends.
func startFaulted(ctx context.Context, ns string, faults ...faultproxy.Fault) (*oracle.Recorder, *faultproxy.Proxy, *replicaSet) {
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	rec, err := oracle.Start(ctx, plane.Config, oracle.Options{Namespaces: []string{ns}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(rec.Stop)
	// The proxy outlives the spec's context: berth stops through it.
	pctx, stopProxy := context.WithCancel(context.Background())
	DeferCleanup(stopProxy)
	proxy, err := faultproxy.Start(pctx, plane.Config, filepath.Join(GinkgoT().TempDir(), "proxy.kubeconfig"), uint64(GinkgoRandomSeed()))
	Expect(err).NotTo(HaveOccurred())
	proxy.Set(faults...)
	set := startReplicas(ctx, []string{proxy.Kubeconfig()}, "--leader-elect=false")
	DeferCleanup(set.close)
	return rec, proxy, set
}

var _ = Describe("API faults between berth and the API server", func() {
	DescribeTable("loses nothing, admits nothing twice and never overshoots quota",
		func(ctx SpecContext, name string, faults ...faultproxy.Fault) {
			ns := "api-" + name
			rec, proxy, set := startFaulted(ctx, ns, faults...)

			Expect(k8s.Create(ctx, builders.Flavor(ns, nil))).To(Succeed())
			Expect(k8s.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, strconv.Itoa(2*gpusPerNode), "").Obj())).To(Succeed())
			Expect(k8s.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
			cfg := rest.CopyConfig(plane.Config)
			cfg.QPS = -1
			c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			sizes := []string{"1", "2", "4", "8"}
			for i := range faultJobs {
				job := builders.Job(ns, "job-"+strconv.Itoa(i), "team").Request(builders.GPU, sizes[i%len(sizes)]).
					PodAnnotations(controlplane.RunFor(time.Second)).Obj()
				Expect(c.Create(ctx, job)).To(Succeed())
			}
			By("keeping the faults on until half the jobs were admitted")
			waitAdmitted(ctx, ns, faultJobs/2)
			injected := proxy.Injected()
			proxy.Set()
			for _, f := range faults {
				Expect(injected[f.Kind]).To(BeNumerically(">", 0), "%s injected", f.Kind)
			}
			Expect(oracle.Settled(ctx, k8s, []string{ns}, 10*time.Minute)).To(Succeed())
			Expect(rec.Violations()).To(BeEmpty())
			Expect(set.procs[0].Running()).To(Succeed(), "berth rode the faults out without a restart")
			AddReportEntry("figures", fmt.Sprintf("%s: %d jobs, faults injected %v, %d object versions checked, 0 violations",
				name, faultJobs, injected, rec.Observed()))
		},
		Entry("admission writes that commit and then answer 504", "commit-504",
			faultproxy.Fault{Kind: faultproxy.CommitThen504, Match: faultproxy.WorkloadStatusWrite, Probability: 0.3}),
		Entry("admission writes that commit and then lose their connection", "commit-drop",
			faultproxy.Fault{Kind: faultproxy.CommitThenDrop, Match: faultproxy.WorkloadStatusWrite, Probability: 0.3}),
		Entry("watch streams cut and resumed with 410 Gone", "watch-gone",
			faultproxy.Fault{Kind: faultproxy.CutWatch, After: 3 * time.Second, Probability: 0.5}),
		Entry("latency spikes", "latency",
			faultproxy.Fault{Kind: faultproxy.Latency, Delay: 2 * time.Second, Probability: 0.1}),
		Entry("throttling", "throttle",
			faultproxy.Fault{Kind: faultproxy.Throttle, Probability: 0.2}),
		Entry("all of them at once", "mixed",
			faultproxy.Fault{Kind: faultproxy.CommitThen504, Match: faultproxy.WorkloadStatusWrite, Probability: 0.15},
			faultproxy.Fault{Kind: faultproxy.CommitThenDrop, Match: faultproxy.Writes, Probability: 0.05},
			faultproxy.Fault{Kind: faultproxy.CutWatch, After: 5 * time.Second, Probability: 0.3},
			faultproxy.Fault{Kind: faultproxy.Latency, Delay: time.Second, Probability: 0.05},
			faultproxy.Fault{Kind: faultproxy.Throttle, Probability: 0.1}),
	)
})
