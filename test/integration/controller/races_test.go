package controller_test

import (
	"context"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
)

// writeHook runs around the real write of an admission (a status patch of
// an Admitted Workload): it may call write, fail, or both.
type writeHook func(ctx context.Context, write func() error, wl *berthv1.Workload) error

// admissionHook restarts berth with a client whose admission writes run
// hook around the real write, and returns the new berth. It restores a
// plain berth after the spec.
func admissionHook(hook writeHook) *setup.Berth {
	opts := berthOptions()
	opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, o)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				write := func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) }
				// Only admission writes: a pending-reason write must not
				// use up the hook.
				if wl, ok := obj.(*berthv1.Workload); ok && sub == "status" && meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted) {
					return hook(ctx, write, wl)
				}
				return write()
			},
		}), nil
	}
	return restartBerth(opts)
}

// firstOnly runs hook around the first admission write only.
func firstOnly(hook writeHook) writeHook {
	var armed atomic.Bool
	armed.Store(true)
	return func(ctx context.Context, write func() error, wl *berthv1.Workload) error {
		if armed.CompareAndSwap(true, false) {
			return hook(ctx, write, wl)
		}
		return write()
	}
}

// queueSetup creates a namespace with a ClusterQueue of gpus GPUs and a
// LocalQueue "team".
func queueSetup(ctx context.Context, gpus string) string {
	ns := newNamespace(ctx)
	Expect(env.Client.Create(ctx, builders.Flavor(ns, nil))).To(Succeed())
	Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, gpus, "").Obj())).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
	return ns
}

var _ = Describe("admission writes that race", Ordered, func() {
	It("counts an admission whose write timed out after it was committed once, and gives its quota to no one else", func(ctx SpecContext) {
		berth := admissionHook(firstOnly(func(_ context.Context, write func() error, _ *berthv1.Workload) error {
			if err := write(); err != nil {
				return err
			}
			return apierrors.NewTimeoutError("injected: the response was lost after the write", 1)
		}))
		ns := queueSetup(ctx, "8")
		first := builders.Job(ns, "first", "team").Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, first)).To(Succeed())
		Eventually(suspended(ctx, first), timeout, interval).Should(BeFalse())
		second := builders.Job(ns, "second", "team").Request(builders.GPU, "8").Obj()
		Expect(env.Client.Create(ctx, second)).To(Succeed())
		Consistently(suspended(ctx, second), "2s", interval).Should(BeTrue(), "the first job's quota is not given twice")

		Expect(testutil.ToFloat64(berth.Metrics.AdmissionsTotal.WithLabelValues(metrics.ResultRolledBack))).To(BeZero(),
			"the uncached read found the admission written: nothing to roll back")
		Expect(testutil.ToFloat64(berth.Metrics.AdmissionsTotal.WithLabelValues(metrics.ResultAdmitted))).To(BeEquivalentTo(1))
		starts := 0
		for _, e := range eventReasons(ctx, ns, first.Name)(Default) {
			if strings.HasPrefix(e, "Started:") {
				starts++
			}
		}
		Expect(starts).To(Equal(1))
	})

	It("refuses an admission decided for a spec that changed before it was written, and admits the new spec", func(ctx SpecContext) {
		ns := queueSetup(ctx, "8")
		job := builders.Job(ns, "grows", "team").Pods(2).Request(builders.GPU, "8").Obj()
		job.Spec.Parallelism = ptr.To[int32](1) // one pod at a time, until it grows
		var raced atomic.Bool
		admissionHook(firstOnly(func(ctx context.Context, write func() error, wl *berthv1.Workload) error {
			defer raced.Store(true)
			// The job grows while the admission for one pod is on its way;
			// its Workload's spec follows before the write lands.
			Eventually(func() error {
				fresh := &batchv1.Job{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
					return err
				}
				fresh.Spec.Parallelism = ptr.To[int32](2)
				return env.Client.Update(ctx, fresh)
			}, timeout, interval).Should(Succeed())
			Eventually(func(g Gomega) int64 {
				fresh := &berthv1.Workload{}
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), fresh)).To(Succeed())
				return fresh.Generation
			}, timeout, interval).Should(BeNumerically(">", wl.Generation))
			return write()
		}))
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Eventually(raced.Load, timeout, interval).Should(BeTrue(), "the admission for one pod was written after the job grew")
		Consistently(func(g Gomega) *berthv1.Admission {
			wl, err := workloadOf(ctx, job)
			g.Expect(err).NotTo(HaveOccurred())
			return wl.Status.Admission
		}, "3s", interval).Should(BeNil(), "16 GPUs do not fit quota for 8")
		Expect(suspended(ctx, job)(Default)).To(BeTrue())

		By("giving the queue quota for the grown job")
		cq := &berthv1.ClusterQueue{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, cq)).To(Succeed())
		cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("16")
		Expect(env.Client.Update(ctx, cq)).To(Succeed())
		Eventually(func(g Gomega) {
			wl, err := workloadOf(ctx, job)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			g.Expect(wl.Status.Admission.PodSetAssignments[0].Count).To(Equal(int32(2)))
		}, timeout, interval).Should(Succeed())
		Eventually(suspended(ctx, job), timeout, interval).Should(BeFalse())
	})
})
