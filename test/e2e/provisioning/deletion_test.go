package provisioning_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/test/oracle"
)

// bookingState is where a gang's booking is when its Job is deleted.
type bookingState string

const (
	// bookingPending: the autoscaler looks for capacity (its pool is out
	// of stock), so the ProvisioningRequest and its PodTemplate exist and
	// no pod does.
	bookingPending bookingState = "waiting for its booking"
	// bookedRunning: the booked nodes joined and the gang runs on them.
	bookedRunning bookingState = "running on its booked nodes"
)

func bookingDeletionEntries() []TableEntry {
	var out []TableEntry
	for _, st := range []bookingState{bookingPending, bookedRunning} {
		for _, p := range []metav1.DeletionPropagation{
			metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground,
		} {
			out = append(out, Entry(fmt.Sprintf("a gang %s, deleted with %s propagation", st, p), st, p))
		}
	}
	return out
}

// Expected, whatever the propagation: the Workload, its
// ProvisioningRequests and their PodTemplates go with the Job (orphan
// propagation only strips the owner references, and berth deletes a
// Workload that lost its job), no job is left unfinished, and the oracle
// sees no pod bound outside an admitted Workload and no quota overshoot.
var _ = Describe("deleting a gang that booked capacity", func() {
	DescribeTable("leaves no ProvisioningRequest, PodTemplate or Workload behind",
		func(ctx SpecContext, st bookingState, policy metav1.DeletionPropagation) {
			ns := rackSetup(ctx, nil, map[string]int32{"r1": 2})
			rec, err := oracle.Start(ctx, env.Plane.Config, oracle.Options{Namespaces: []string{ns}})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(rec.Stop)
			if st == bookingPending {
				Expect(env.Client.Patch(ctx, &berthv1.CapacityPool{ObjectMeta: metav1.ObjectMeta{Name: ns + "-r1"}},
					client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+autoscaler.StockoutAnnotation+`":"true"}}}`)))).
					To(Succeed())
			}
			job := gang(ctx, ns, "train", time.Hour)

			By("waiting for the booking: its request and template exist")
			Eventually(func(g Gomega) {
				pr := request(ctx, g, job)
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Spec.PodSets[0].PodTemplateRef.Name},
					&corev1.PodTemplate{})).To(Succeed())
				if st == bookedRunning {
					g.Expect(racksOf(ctx, job)(g)).To(Equal([]string{"r1"}))
				}
			}, timeout, interval).Should(Succeed())

			By("deleting the Job")
			Expect(env.Client.Delete(ctx, job, client.PropagationPolicy(policy))).To(Succeed())
			if policy == metav1.DeletePropagationOrphan {
				// Orphaned pods are not berth's to stop, and hold their
				// GPUs until deleted.
				Expect(client.IgnoreNotFound(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns),
					client.GracePeriodSeconds(0)))).To(Succeed())
			}
			Expect(oracle.Settled(ctx, env.Client, []string{ns}, timeout)).To(Succeed())
			Eventually(func(g Gomega) {
				for _, l := range []client.ObjectList{
					&berthv1.WorkloadList{}, &autoscalingv1.ProvisioningRequestList{}, &corev1.PodTemplateList{}, &corev1.PodList{},
				} {
					g.Expect(env.Client.List(ctx, l, client.InNamespace(ns))).To(Succeed())
					items, err := meta.ExtractList(l)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(items).To(BeEmpty(), "%T of the deleted Job", l)
				}
			}, timeout, interval).Should(Succeed())
			Expect(rec.Violations()).To(BeEmpty())
		},
		bookingDeletionEntries(),
	)
})
