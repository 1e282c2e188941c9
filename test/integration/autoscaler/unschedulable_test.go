package autoscaler_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/test/controlplane"
)

var _ = Describe("Unschedulable pods", func() {
	It("scale up one node of a pool whose template admits them, not of one whose taint they do not tolerate", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		reserved := pool(ctx, c+"-a-reserved", c, 4, nil, nil)
		Expect(env.Client.Patch(ctx, reserved, client.RawPatch("application/merge-patch+json",
			[]byte(`{"spec":{"nodeTemplate":{"taints":[{"key":"example.com/reserved","value":"true","effect":"NoSchedule"}]}}}`)))).To(Succeed())
		open := pool(ctx, c+"-b-open", c, 4, nil, nil)

		pendingPod(ctx, ns, c, 8, nil)
		var nodes []corev1.Node
		Eventually(func() []string { nodes = poolNodes(ctx, open.Name); return nodeNames(nodes) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(open.Name + "-0"))
		Expect(nodes[0].Annotations).To(HaveKeyWithValue(autoscaler.PodsNodeAnnotation, "true"))
		Expect(nodes[0].Annotations).To(HaveKeyWithValue(controlplane.FakeNodeAnnotation, controlplane.FakeNodeAnnotationValue))
		Expect(nodes[0].Annotations).NotTo(HaveKey(autoscaler.CreatedForAnnotation))
		Expect(poolNodes(ctx, reserved.Name)).To(BeEmpty())

		By("the node still joining holds the pod: no more are created")
		Consistently(func() []corev1.Node { return poolNodes(ctx, open.Name) }).WithTimeout(loops).WithPolling(interval).Should(HaveLen(1))
		Expect(poolNodes(ctx, reserved.Name)).To(BeEmpty())
		Expect(autoscaler.PendingOfPool(getPool(ctx, Default, open.Name))).To(BeEmpty(), "the node was created")
		expectNoPoolStatus(ctx, open.Name)
	})

	It("need no node when they fit a Ready node's free room, and scale up for the one that no longer does", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		readyNode(ctx, c+"-n0", c, 8)
		cp := pool(ctx, c+"-pool", c, 4, nil, nil)

		pendingPod(ctx, ns, c, 4, nil)
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(BeEmpty())

		By("a second pod leaves one of them without room: one node")
		pendingPod(ctx, ns, c, 8, nil)
		Eventually(func() []string { return nodeNames(poolNodes(ctx, cp.Name)) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(cp.Name + "-0"))
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(HaveLen(1))
	})

	It("ignore a gated pod until its gates are removed", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		cp := pool(ctx, c+"-pool", c, 4, nil, nil)

		p := pendingPod(ctx, ns, c, 8, func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
		})
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(BeEmpty())

		By("without its gate the same pod gets a node")
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			p.Spec.SchedulingGates = nil
			g.Expect(env.Client.Update(ctx, p)).To(Succeed())
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		Eventually(func() []string { return nodeNames(poolNodes(ctx, cp.Name)) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(cp.Name + "-0"))
	})

	It("never scale up for an expendable pod (priority -11), and do for priority -10", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		cp := pool(ctx, c+"-pool", c, 4, nil, nil)
		expendable := priorityClass(ctx, c+"-minus-11", -11)
		cutoff := priorityClass(ctx, c+"-minus-10", -10)

		pendingPod(ctx, ns, c, 8, withPriority(expendable))
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(BeEmpty())

		By("a pod at the cutoff gets a node, and only its own: each pod needs a whole node")
		pendingPod(ctx, ns, c, 8, withPriority(cutoff))
		Eventually(func() []string { return nodeNames(poolNodes(ctx, cp.Name)) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(cp.Name + "-0"))
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(HaveLen(1))
	})

	It("are left alone with the option off", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		cp := pool(ctx, c+"-pool", c, 4, nil, nil)
		off := options()
		off.ScaleUpUnschedulablePods = false
		restartAutoscaler(ctx, off)
		// Whatever happens below, the next specs get the suite's options.
		restored := false
		DeferCleanup(func(ctx SpecContext) {
			if !restored {
				restartAutoscaler(ctx, options())
			}
		})

		pendingPod(ctx, ns, c, 8, nil)
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(BeEmpty())

		By("with the option on again the same pod gets a node")
		restartAutoscaler(ctx, options())
		restored = true
		Eventually(func() []string { return nodeNames(poolNodes(ctx, cp.Name)) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(cp.Name + "-0"))
	})

	It("record a scale-up's nodes on the pool until they are due, and a restarted autoscaler creates them once", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		slow := pool(ctx, c+"-slow", c, 4, nil, map[string]string{autoscaler.LatencyAnnotation: "1h"})

		pendingPod(ctx, ns, c, 8, nil)
		pending := func(g Gomega) []autoscaler.PendingNode { return autoscaler.PendingOfPool(getPool(ctx, g, slow.Name)) }
		Eventually(pending).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(HaveField("Node", slow.Name+"-0")))
		By("the node still to come holds the pod: nothing more is decided, nothing created before the latency")
		Consistently(pending).WithTimeout(loops).WithPolling(interval).Should(HaveLen(1))
		Expect(poolNodes(ctx, slow.Name)).To(BeEmpty())

		By("a restarted autoscaler creates it once due, and no other")
		restartAutoscaler(ctx, options())
		fakeClock.Step(time.Hour)
		Eventually(func() []string { return nodeNames(poolNodes(ctx, slow.Name)) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(slow.Name + "-0"))
		Eventually(pending).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
		Consistently(func() []corev1.Node { return poolNodes(ctx, slow.Name) }).WithTimeout(loops).WithPolling(interval).Should(HaveLen(1))
	})
})

// pendingPod creates a pod of n GPUs pinned to the case's nodes, changed
// by mutate, and marks it PodScheduled=False with reason Unschedulable
// through the status subresource, as kube-scheduler would (this plane runs
// none).
func pendingPod(ctx context.Context, ns, caseID string, n int64, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pending-"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{caseLabel: caseID},
			Containers: []corev1.Container{{
				Name: "server", Image: "registry.example.com/server:latest",
				Resources: corev1.ResourceRequirements{Requests: gpus(n), Limits: corev1.ResourceList{
					controlplane.GPUResource: *resource.NewQuantity(n, resource.DecimalSI),
				}},
			}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	Expect(env.Client.Create(ctx, p)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.", LastTransitionTime: metav1.Now(),
		}}
		g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return p
}

// priorityClass creates a PriorityClass of value.
func priorityClass(ctx context.Context, name string, value int32) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	Expect(env.Client.Create(ctx, pc)).To(Succeed())
	return pc
}

// withPriority gives a pod the class and its value, as the Priority
// admission plugin resolves it (which accepts a value equal to the
// class's).
func withPriority(pc *schedulingv1.PriorityClass) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.PriorityClassName = pc.Name
		p.Spec.Priority = ptr.To(pc.Value)
	}
}

// getPool reads the CapacityPool name from the API server.
func getPool(ctx context.Context, g Gomega, name string) *berthv1.CapacityPool {
	cp := &berthv1.CapacityPool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, cp)).To(Succeed())
	return cp
}

// restartAutoscaler stops the suite's autoscaler and starts it with o.
func restartAutoscaler(ctx context.Context, o autoscaler.Options) {
	Expect(stopAutoscaler()).To(Succeed())
	var err error
	stopAutoscaler, err = env.StartAutoscaler(ctx, o)
	Expect(err).NotTo(HaveOccurred())
}
