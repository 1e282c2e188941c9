package controller_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
)

// admittedByLocalQueue counts the namespace's admitted workloads per
// LocalQueue.
func admittedByLocalQueue(ctx context.Context, ns string) func(Gomega) map[string]int {
	return func(g Gomega) map[string]int {
		wls := &berthv1.WorkloadList{}
		g.Expect(env.Client.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
		out := map[string]int{}
		for _, wl := range wls.Items {
			if wl.Status.Admission != nil {
				out[wl.Spec.QueueName]++
			}
		}
		return out
	}
}

var _ = Describe("fair sharing between LocalQueues", Ordered, func() {
	BeforeAll(func() {
		opts := admission.DefaultOptions()
		opts.LocalQueueFairSharing = true
		fair := berthOptions()
		fair.Setup.Engine = opts
		restartBerth(fair)
	})

	It("shares a ClusterQueue between LocalQueues of weights 1:1:2 whatever order they queued in", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.Flavor(ns, nil))).To(Succeed())
		cq := builders.ClusterQueue(ns).Quota(ns, builders.GPU, "0", "").Obj()
		Expect(env.Client.Create(ctx, cq)).To(Succeed())
		weights := []struct{ name, weight string }{{"heavy", "1"}, {"light", "1"}, {"double", "2"}}
		for _, w := range weights {
			lq := builders.LocalQueue(ns, w.name, cq.Name)
			q := resource.MustParse(w.weight)
			lq.Spec.FairSharing = &berthv1.LocalQueueFairSharing{Weight: &q}
			Expect(env.Client.Create(ctx, lq)).To(Succeed())
		}

		By("queueing 8 one-GPU workloads per LocalQueue, heavy first, while the queue has no quota")
		for _, w := range weights {
			for i := range 8 {
				Expect(env.Client.Create(ctx, &berthv1.Workload{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", w.name, i)},
					Spec: berthv1.WorkloadSpec{QueueName: w.name, PodSets: []berthv1.PodSet{{
						Name: "main", Count: 1, Requests: corev1.ResourceList{builders.GPU: resource.MustParse("1")},
					}}},
				})).To(Succeed())
			}
			// Each LocalQueue's workloads reach the engine before the next's.
			Eventually(func(g Gomega) {
				wl := &berthv1.Workload{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.name + "-7"}, wl)).To(Succeed())
				g.Expect(meta.IsStatusConditionFalse(wl.Status.Conditions, berthv1.ConditionQuotaReserved)).To(BeTrue())
			}, timeout, interval).Should(Succeed())
		}

		By("giving the ClusterQueue 8 GPUs: the LocalQueues get them 2:2:4, not heavy's 8 first")
		Eventually(func() error {
			fresh := &berthv1.ClusterQueue{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cq), fresh); err != nil {
				return err
			}
			fresh.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("8")
			return env.Client.Update(ctx, fresh)
		}, timeout, interval).Should(Succeed())
		Eventually(admittedByLocalQueue(ctx, ns), timeout, interval).Should(Equal(map[string]int{"heavy": 2, "light": 2, "double": 4}))
		Consistently(admittedByLocalQueue(ctx, ns), "1s", interval).Should(Equal(map[string]int{"heavy": 2, "light": 2, "double": 4}))
	})

	It("rejects a LocalQueue weight that is not positive, saying what is allowed", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		for _, bad := range []string{"0", "-1"} {
			lq := builders.LocalQueue(ns, "bad", "any")
			q := resource.MustParse(bad)
			lq.Spec.FairSharing = &berthv1.LocalQueueFairSharing{Weight: &q}
			err := env.Client.Create(ctx, lq)
			Expect(err).To(MatchError(ContainSubstring("weight must be a positive quantity")), "weight %s", bad)
		}
	})
})
