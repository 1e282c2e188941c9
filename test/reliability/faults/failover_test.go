package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/leader"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/oracle"
	"github.com/berth-dev/berth/test/scale"
)

// burst is how many Jobs arrive at once: 500 at full scale (`make
// test-long`), 200 in `make test`, where the faults come after fewer
// admissions (step) so that each still hits a leader with jobs in flight.
var burst = scale.Pick(200, 500)

// burstJobs creates the burst's Jobs, of 1 to 8 GPUs each, as fast as the
// API server takes them.
func burstJobs(ctx context.Context, ns string, rng *rand.Rand) error {
	cfg := rest.CopyConfig(plane.Config)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		return err
	}
	sizes := []string{"1", "2", "4", "8"}
	for i := range burst {
		job := builders.Job(ns, "job-"+strconv.Itoa(i), "team").Request(builders.GPU, sizes[rng.IntN(len(sizes))]).
			PodAnnotations(controlplane.RunFor(time.Second)).Obj()
		if err := createRetrying(ctx, c, job); err != nil {
			return fmt.Errorf("creating job %d: %w", i, err)
		}
	}
	return nil
}

// createRetrying creates obj, retrying while the API server cannot call
// berth's webhooks, as kubectl and controllers do. A webhook call routed
// to a replica that was just killed or paused fails (failurePolicy Fail)
// until a Service would stop routing to it; that is the replica's death,
// not a lost job.
func createRetrying(ctx context.Context, c client.Client, obj client.Object) error {
	var err error
	// A minute: both replicas restart one after the other in the soak.
	for range 60 {
		if err = c.Create(ctx, obj); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return err
}

// admitted counts the Workloads of ns that were admitted (running or
// finished).
func admitted(ctx context.Context, g Gomega, ns string) int {
	wls := &berthv1.WorkloadList{}
	g.Expect(k8s.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, wl := range wls.Items {
		if wl.Status.Admission != nil || meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionFinished) {
			n++
		}
	}
	return n
}

// waitAdmitted waits until at least n Workloads of ns were admitted.
func waitAdmitted(ctx context.Context, ns string, n int) {
	Eventually(func(g Gomega) {
		g.Expect(admitted(ctx, g, ns)).To(BeNumerically(">=", n))
	}).WithContext(ctx).WithTimeout(5*time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), "%d workloads admitted", n)
}

var _ = Describe("two replicas under a burst", func() {
	It("loses nothing and admits nothing twice while its leader is killed, paused past its lease and restarted", func(ctx SpecContext) {
		seed := GinkgoRandomSeed()
		rng := rand.New(rand.NewPCG(uint64(seed), 16))
		ns := "burst"
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		rec, err := oracle.Start(ctx, plane.Config, oracle.Options{Namespaces: []string{ns}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rec.Stop)
		// The webhooks validate the queues: berth first.
		set := startReplicas(ctx, kubeconfig[:])
		DeferCleanup(set.close)
		Expect(k8s.Create(ctx, builders.Flavor("gpu", nil))).To(Succeed())
		Expect(k8s.Create(ctx, builders.ClusterQueue("burst").Quota("gpu", builders.GPU, strconv.Itoa(nodes*gpusPerNode), "").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, builders.LocalQueue(ns, "team", "burst"))).To(Succeed())
		created := make(chan error, 1)
		go func() { created <- burstJobs(ctx, ns, rng) }()
		var faults []string
		progress := 0
		gap := scale.Pick(15, 30)
		step := func() int { progress += gap + rng.IntN(2*gap); return progress }

		By("killing the leader with SIGKILL")
		waitAdmitted(ctx, ns, step())
		killed, holder := set.leader(ctx, "")
		Expect(set.procs[killed].Signal(syscall.SIGKILL)).To(Succeed())
		Eventually(set.procs[killed].Exited()).WithTimeout(time.Minute).Should(BeClosed())
		set.leader(ctx, holder)
		set.start(ctx, killed)
		faults = append(faults, fmt.Sprintf("SIGKILL of the leader after %d admissions", progress))

		By("pausing the leader past its lease with SIGSTOP, then resuming it")
		waitAdmitted(ctx, ns, step())
		paused, holder := set.leader(ctx, "")
		Expect(set.procs[paused].Signal(syscall.SIGSTOP)).To(Succeed())
		set.leader(ctx, holder)
		takeover := lease(ctx, Default).Spec.AcquireTime.Time
		Expect(set.procs[paused].Signal(syscall.SIGCONT)).To(Succeed())
		Eventually(set.procs[paused].Exited()).WithTimeout(time.Minute).Should(BeClosed(), "a leader that lost its lease stops")
		gone := time.Now()
		fenced := strings.Count(set.procs[paused].Log(), leader.ErrNotLeader.Error())
		set.start(ctx, paused)
		faults = append(faults, fmt.Sprintf("SIGSTOP of the leader for its lease after %d admissions", progress))

		By("restarting both replicas")
		waitAdmitted(ctx, ns, step())
		set.stopAll()
		for i := range set.procs {
			set.start(ctx, i)
		}
		faults = append(faults, fmt.Sprintf("restart of both replicas after %d admissions", progress))

		Expect(<-created).To(Succeed())
		Expect(oracle.Settled(ctx, k8s, []string{ns}, 10*time.Minute)).To(Succeed())
		Expect(rec.Violations()).To(BeEmpty())
		// The audit backend writes in batches of up to a second.
		// The audit backend writes in batches of up to a second; Settled
		// took longer than that.
		Expect(writesBetween(fmt.Sprintf("berth-%d", paused), takeover, gone)).To(BeEmpty(),
			"the paused leader wrote after the lease moved")
		AddReportEntry("figures", fmt.Sprintf("seed %d, %d jobs, faults: %v, %d object versions checked, 0 violations; "+
			"the resumed leader tried %d writes after its renew deadline, all fenced", seed, burst, faults, rec.Observed(), fenced))
	}, SpecTimeout(25*time.Minute))
})
