package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/faultproxy"
	"github.com/berth-dev/berth/test/oracle"
)

// podPatch matches berth's release of a pod: a patch of the pod itself.
func podPatch(r *http.Request, _ []byte) bool {
	return r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/pods/") && !strings.HasSuffix(r.URL.Path, "/status")
}

// replicaPods counts the live pods of Deployment app in ns: released on a
// record berth counts, released on a Workload, and gated.
func replicaPods(ctx context.Context, g Gomega, ns, app string) (recorded, onWorkload, gated int) {
	list := &corev1.PodList{}
	g.Expect(k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	for i := range list.Items {
		p := &list.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		_, has, err := lifecycle.RecordOf(p)
		switch {
		case has && err == nil:
			recorded++
		case len(p.Spec.SchedulingGates) > 0:
			gated++
		default:
			onWorkload++
		}
	}
	return recorded, onWorkload, gated
}

var _ = Describe("API faults on the releases of replicas on records", func() {
	It("counts each replica once, never overshoots quota and gives it all back", func(ctx SpecContext) {
		const ns, quota = "api-records", 2 * gpusPerNode
		// A release that commits and then fails looks failed to berth:
		// it reads the pod again and must count the record it finds once.
		rec, proxy, set := startFaulted(ctx, ns,
			faultproxy.Fault{Kind: faultproxy.CommitThen504, Match: podPatch, Probability: 0.3},
			faultproxy.Fault{Kind: faultproxy.CommitThenDrop, Match: podPatch, Probability: 0.3})
		Expect(k8s.Create(ctx, builders.Flavor(ns, nil))).To(Succeed())
		Expect(k8s.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, strconv.Itoa(quota), "").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())

		By("scaling a Deployment of one-GPU replicas past its quota in steps, the faults on")
		d := builders.Deployment(ns, "api", "team", 4, "1")
		Expect(k8s.Create(ctx, d)).To(Succeed())
		running := 4
		for _, n := range []int{10, quota + 6} {
			Eventually(func(g Gomega) {
				recorded, onWorkload, _ := replicaPods(ctx, g, ns, "api")
				g.Expect(recorded + onWorkload).To(Equal(running))
			}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
			Expect(k8s.Patch(ctx, d, client.RawPatch("application/merge-patch+json",
				[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))))).To(Succeed())
			running = min(n, quota)
		}
		Eventually(func(g Gomega) {
			recorded, onWorkload, gated := replicaPods(ctx, g, ns, "api")
			g.Expect(recorded + onWorkload).To(Equal(quota))
			g.Expect(gated).To(Equal(6))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		injected := proxy.Injected()
		proxy.Set()
		// Either kind is a release berth sees fail after it committed; with
		// about twenty releases at these odds, none at all is below 1e-5.
		Expect(injected[faultproxy.CommitThen504]+injected[faultproxy.CommitThenDrop]).To(BeNumerically(">", 0), "faults injected")
		recorded, _, _ := replicaPods(ctx, Default, ns, "api")
		Expect(recorded).To(BeNumerically(">", 0), "replicas ran on records")

		By("scaling to zero: every replica's quota is given back")
		Expect(k8s.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			cq := &berthv1.ClusterQueue{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
			g.Expect(cq.Status.AdmittedWorkloads).To(BeZero())
			g.Expect(cq.Status.FlavorsUsage[0].Resources[0].Total.IsZero()).To(BeTrue(), "usage %v", cq.Status.FlavorsUsage)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(k8s.Delete(ctx, d)).To(Succeed())
		Expect(oracle.Settled(ctx, k8s, []string{ns}, 5*time.Minute)).To(Succeed())
		Expect(rec.Violations()).To(BeEmpty())
		Expect(set.procs[0].Running()).To(Succeed(), "berth rode the faults out without a restart")
		AddReportEntry("figures", fmt.Sprintf("records: %d one-GPU replicas on %d GPUs, %d on records at the end of the faults, faults injected %v, %d object versions checked, 0 violations",
			quota+6, quota, recorded, injected, rec.Observed()))
	})
})
