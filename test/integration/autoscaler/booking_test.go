package autoscaler_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
)

var _ = Describe("booking", func() {
	It("expires after the booking TTL and releases the capacity", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		readyNode(ctx, c+"-n0", c, 8)
		template(ctx, ns, "eight-gpus", c, 8, nil)

		booked := request(ctx, ns, "booked", checkCapacity, "eight-gpus", 1, nil)
		expectCondition(ctx, booked, autoscalingv1.Provisioned, metav1.ConditionTrue, "")
		waiting := request(ctx, ns, "waiting", checkCapacity, "eight-gpus", 1, nil)
		expectCondition(ctx, waiting, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)

		fakeClock.Step(bookingTTL + time.Second)
		expectCondition(ctx, booked, autoscalingv1.BookingExpired, metav1.ConditionTrue, autoscaler.ReasonBookingExpired)
		expectCondition(ctx, waiting, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonCapacityFound)
	})

	It("stops holding capacity once the request's pods consume it, and still expires at its time", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		node := readyNode(ctx, c+"-n0", c, 8)
		template(ctx, ns, "four-gpus", c, 4, nil)

		pr := request(ctx, ns, "consumed", checkCapacity, "four-gpus", 2, nil)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, "")
		consumer(ctx, ns, pr.Name, node.Name, 4)
		consumer(ctx, ns, pr.Name, node.Name, 4)
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pr), pr)).To(Succeed())
			g.Expect(pr.Status.ProvisioningClassDetails).To(HaveKeyWithValue(autoscaler.DetailConsumed, autoscalingv1.Detail("true")))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Expect(condition(ctx, Default, pr, autoscalingv1.BookingExpired)).To(BeNil())

		// cluster-autoscaler expires a booking at its time whether or not
		// pods used it; berth tells the two apart by the consuming pods.
		fakeClock.Step(bookingTTL + time.Second)
		expectCondition(ctx, pr, autoscalingv1.BookingExpired, metav1.ConditionTrue, autoscaler.ReasonBookingExpired)

		By("revoking the capacity after the pods started, as a cloud reclaiming it would")
		patch := client.MergeFrom(pr.DeepCopy())
		pr.Annotations = map[string]string{autoscaler.RevokeAnnotation: "true"}
		Expect(env.Client.Patch(ctx, pr, patch)).To(Succeed())
		expectCondition(ctx, pr, autoscalingv1.CapacityRevoked, metav1.ConditionTrue, autoscaler.ReasonRevoked)
	})

	It("is released when the capacity is revoked", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		readyNode(ctx, c+"-n0", c, 8)
		template(ctx, ns, "eight-gpus", c, 8, nil)

		pr := request(ctx, ns, "revoked", checkCapacity, "eight-gpus", 1, nil)
		expectCondition(ctx, pr, autoscalingv1.Provisioned, metav1.ConditionTrue, "")
		waiting := request(ctx, ns, "waiting", checkCapacity, "eight-gpus", 1, nil)
		expectCondition(ctx, waiting, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)

		patch := client.MergeFrom(pr.DeepCopy())
		pr.Annotations = map[string]string{autoscaler.RevokeAnnotation: "true"}
		Expect(env.Client.Patch(ctx, pr, patch)).To(Succeed())
		expectCondition(ctx, pr, autoscalingv1.CapacityRevoked, metav1.ConditionTrue, autoscaler.ReasonRevoked)
		fakeClock.Step(retryBackoff)
		expectCondition(ctx, waiting, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonCapacityFound)
	})
})
