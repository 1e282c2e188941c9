package autoscaler_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
)

const checkCapacity = autoscalingv1.ProvisioningClassCheckCapacity

var _ = Describe("check-capacity", func() {
	It("books capacity that fits, so a second request for it is not provisioned", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		node := readyNode(ctx, c+"-n0", c, 8)
		template(ctx, ns, "four-gpus", c, 4, nil)

		first := request(ctx, ns, "first", checkCapacity, "four-gpus", 2, nil)
		expectCondition(ctx, first, autoscalingv1.Accepted, metav1.ConditionTrue, autoscaler.ReasonAccepted)
		expectCondition(ctx, first, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonCapacityFound)
		Expect(first.Status.ProvisioningClassDetails).To(HaveKeyWithValue(autoscaler.DetailNodes, autoscalingv1.Detail(node.Name)))
		Expect(first.Status.ProvisioningClassDetails).To(HaveKeyWithValue(autoscaler.DetailPlacement, autoscalingv1.Detail(node.Name+":0:2")))

		second := request(ctx, ns, "second", checkCapacity, "four-gpus", 1, nil)
		expectCondition(ctx, second, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)
	})

	It("retries a request that does not fit until capacity appears, and fails it at once with noRetry", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		readyNode(ctx, c+"-n0", c, 4)
		template(ctx, ns, "four-gpus", c, 4, nil)

		retried := request(ctx, ns, "retried", checkCapacity, "four-gpus", 2, nil)
		cond := expectCondition(ctx, retried, autoscalingv1.Provisioned, metav1.ConditionFalse, autoscaler.ReasonCapacityNotFound)
		Expect(cond.Message).To(ContainSubstring("pod set 0: 1 of 2 pods do not fit"))
		Expect(retried.Status.Conditions).NotTo(ContainElement(HaveField("Type", autoscalingv1.Failed)))

		noRetry := request(ctx, ns, "no-retry", checkCapacity, "four-gpus", 2, map[string]autoscalingv1.Parameter{"noRetry": "true"})
		expectCondition(ctx, noRetry, autoscalingv1.Failed, metav1.ConditionTrue, autoscaler.ReasonCapacityNotFound)

		By("a second node makes the retried request fit at its next try, a backoff later")
		readyNode(ctx, c+"-n1", c, 4)
		Consistently(func(g Gomega) metav1.ConditionStatus {
			return condition(ctx, g, retried, autoscalingv1.Provisioned).Status
		}).WithTimeout(time.Second).WithPolling(interval).Should(Equal(metav1.ConditionFalse))
		fakeClock.Step(retryBackoff)
		expectCondition(ctx, retried, autoscalingv1.Provisioned, metav1.ConditionTrue, autoscaler.ReasonCapacityFound)
	})

	It("ignores requests of other classes", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		template(ctx, ns, "one-gpu", c, 1, nil)
		other := request(ctx, ns, "other", "queued-provisioning.gke.io", "one-gpu", 1, nil)
		// A supported request created after it is answered; the other one
		// is left alone by then (one worker, requests in order).
		readyNode(ctx, c+"-n0", c, 1)
		marker := request(ctx, ns, "marker", checkCapacity, "one-gpu", 1, nil)
		expectCondition(ctx, marker, autoscalingv1.Provisioned, metav1.ConditionTrue, "")
		Expect(condition(ctx, Default, other, autoscalingv1.Accepted)).To(BeNil())
	})
})
