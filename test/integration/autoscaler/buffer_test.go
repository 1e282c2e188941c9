package autoscaler_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/test/controlplane"
)

// loops is long enough for several of the suite's buffer loops (its
// RetryInterval), to see that something does not happen.
const loops = 1500 * time.Millisecond

var _ = Describe("CapacityBuffer", func() {
	It("keeps a podTemplateRef buffer on free room: status written, fake pods injected, no node created", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		readyNode(ctx, c+"-n0", c, 8)
		cp := pool(ctx, c+"-pool", c, 4, nil, nil)
		template(ctx, ns, "chunk", c, 4, nil)

		b := buffer(ctx, ns, "warm", cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: ptr.To[int32](2)})
		expectBufferCondition(ctx, b, cbv1beta1.ConditionReadyForProvisioning, metav1.ConditionTrue, cbv1beta1.ReasonAttributesSetSuccessfully)
		Expect(b.Status.Replicas).To(HaveValue(Equal(int32(2))))
		Expect(b.Status.PodTemplateRef).To(HaveValue(HaveField("Name", "chunk")))
		Expect(b.Status.ProvisioningStrategy).To(HaveValue(Equal(cbv1beta1.ActiveCapacity)))
		t := &corev1.PodTemplate{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "chunk"}, t)).To(Succeed())
		Expect(b.Status.PodTemplateGeneration).To(HaveValue(Equal(t.Generation)))
		expectBufferCondition(ctx, b, cbv1beta1.ConditionProvisioning, metav1.ConditionTrue, cbv1beta1.ReasonFakePodsInjected)

		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(BeEmpty())
	})

	It("scales up a pool whose template admits the fake pods, not one whose taint they do not tolerate", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		reserved := pool(ctx, c+"-a-reserved", c, 4, nil, nil)
		Expect(env.Client.Patch(ctx, reserved, client.RawPatch("application/merge-patch+json",
			[]byte(`{"spec":{"nodeTemplate":{"taints":[{"key":"example.com/reserved","value":"true","effect":"NoSchedule"}]}}}`)))).To(Succeed())
		open := pool(ctx, c+"-b-open", c, 4, nil, nil)
		template(ctx, ns, "chunk", c, 8, nil)

		b := buffer(ctx, ns, "warm", cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: ptr.To[int32](2)})
		expectBufferCondition(ctx, b, cbv1beta1.ConditionProvisioning, metav1.ConditionTrue, cbv1beta1.ReasonFakePodsInjected)
		var nodes []corev1.Node
		Eventually(func() []string { nodes = poolNodes(ctx, open.Name); return nodeNames(nodes) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(open.Name+"-0", open.Name+"-1"))
		Expect(nodes[0].Annotations).To(HaveKeyWithValue(autoscaler.BufferNodeAnnotation, ns+"/warm"))
		Expect(nodes[0].Annotations).To(HaveKeyWithValue(controlplane.FakeNodeAnnotation, controlplane.FakeNodeAnnotationValue))
		Expect(poolNodes(ctx, reserved.Name)).To(BeEmpty())

		By("the nodes still joining hold the buffer: no more are created")
		Consistently(func() []corev1.Node { return poolNodes(ctx, open.Name) }).WithTimeout(loops).WithPolling(interval).Should(HaveLen(2))
		Expect(getBuffer(ctx, Default, b).Annotations).NotTo(HaveKey(autoscaler.BufferPendingAnnotation), "all nodes created")
		expectNoPoolStatus(ctx, open.Name)
	})

	It("restores the buffer once a real pod takes its room", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		n0 := readyNode(ctx, c+"-n0", c, 8)
		cp := pool(ctx, c+"-pool", c, 4, nil, nil)
		template(ctx, ns, "chunk", c, 8, nil)

		b := buffer(ctx, ns, "warm", cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: ptr.To[int32](1)})
		expectBufferCondition(ctx, b, cbv1beta1.ConditionProvisioning, metav1.ConditionTrue, cbv1beta1.ReasonFakePodsInjected)
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(BeEmpty())

		By("a real pod binds onto the room the buffer held")
		realPod(ctx, ns, n0.Name, 8)
		Eventually(func() []string { return nodeNames(poolNodes(ctx, cp.Name)) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(cp.Name + "-0"))
		Consistently(func() []corev1.Node { return poolNodes(ctx, cp.Name) }).WithTimeout(loops).WithPolling(interval).Should(HaveLen(1))
	})

	It("records a scale-up's nodes on the buffer until they are due, and a restarted autoscaler creates them", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		slow := pool(ctx, c+"-slow", c, 4, nil, map[string]string{autoscaler.LatencyAnnotation: "1h"})
		template(ctx, ns, "chunk", c, 8, nil)
		b := buffer(ctx, ns, "warm", cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: ptr.To[int32](1)})
		pending := func(g Gomega) []autoscaler.PendingNode { return autoscaler.PendingOf(getBuffer(ctx, g, b)) }
		Eventually(pending).WithTimeout(timeout).WithPolling(interval).Should(ConsistOf(HaveField("Node", slow.Name+"-0")))
		By("the node still to come holds the buffer: nothing more is decided, nothing created before the latency")
		Consistently(pending).WithTimeout(loops).WithPolling(interval).Should(HaveLen(1))
		Expect(poolNodes(ctx, slow.Name)).To(BeEmpty())

		By("a restarted autoscaler creates it once due")
		Expect(stopAutoscaler()).To(Succeed())
		var err error
		stopAutoscaler, err = env.StartAutoscaler(ctx, options())
		Expect(err).NotTo(HaveOccurred())
		fakeClock.Step(time.Hour)
		Eventually(func() []string { return nodeNames(poolNodes(ctx, slow.Name)) }).WithTimeout(timeout).WithPolling(interval).
			Should(ConsistOf(slow.Name + "-0"))
		Eventually(pending).WithTimeout(timeout).WithPolling(interval).Should(BeEmpty())
		Consistently(func() []corev1.Node { return poolNodes(ctx, slow.Name) }).WithTimeout(loops).WithPolling(interval).Should(HaveLen(1))
	})

	It("sizes a scalableRef buffer by percentage of the Deployment's replicas, from a PodTemplate it owns", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		d := deployment(ctx, ns, "web", c, 3)
		b := buffer(ctx, ns, "web-buffer", cbv1beta1.CapacityBufferSpec{
			ScalableRef: &cbv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: d.Name},
			Percentage:  ptr.To[int32](50),
		})
		expectBufferCondition(ctx, b, cbv1beta1.ConditionReadyForProvisioning, metav1.ConditionTrue, cbv1beta1.ReasonAttributesSetSuccessfully)
		Expect(b.Status.Replicas).To(HaveValue(Equal(int32(2))), "ceil(50%% of 3)")
		managed := autoscaler.ManagedTemplateName(b.Name)
		Expect(b.Status.PodTemplateRef).To(HaveValue(HaveField("Name", managed)))
		t := &corev1.PodTemplate{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: managed}, t)).To(Succeed())
		owner := metav1.GetControllerOf(t)
		Expect(owner).NotTo(BeNil())
		Expect(owner.Kind).To(Equal("CapacityBuffer"))
		Expect(owner.Name).To(Equal(b.Name))
		Expect(owner.UID).To(Equal(b.UID))
		Expect(t.Template.Spec.NodeSelector).To(Equal(d.Spec.Template.Spec.NodeSelector))

		By("scaling the Deployment resizes the buffer")
		Expect(env.Client.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":5}}`)))).To(Succeed())
		Eventually(func(g Gomega) *int32 { return getBuffer(ctx, g, b).Status.Replicas }).WithTimeout(timeout).WithPolling(interval).
			Should(HaveValue(Equal(int32(3))))
	})

	It("reports a missing PodTemplate as not ready, naming it, and recovers once it exists", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		b := buffer(ctx, ns, "orphan", cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "missing"}, Replicas: ptr.To[int32](1)})
		cond := expectBufferCondition(ctx, b, cbv1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, cbv1beta1.ReasonError)
		Expect(cond.Message).To(And(ContainSubstring("PodTemplate "+ns+"/missing"), ContainSubstring("does not exist")))
		Expect(b.Status.Replicas).To(BeNil())
		expectBufferCondition(ctx, b, cbv1beta1.ConditionProvisioning, metav1.ConditionFalse, cbv1beta1.ReasonNotReadyForProvisioning)

		template(ctx, ns, "missing", c, 8, nil)
		expectBufferCondition(ctx, b, cbv1beta1.ConditionReadyForProvisioning, metav1.ConditionTrue, cbv1beta1.ReasonAttributesSetSuccessfully)
		Expect(b.Status.Replicas).To(HaveValue(Equal(int32(1))))
	})

	It("caps the replicas by the namespace's ResourceQuota", func(ctx SpecContext) {
		ns, c := newNamespace(ctx), newCase()
		template(ctx, ns, "chunk", c, 8, nil)
		q := gpuQuota(ctx, ns, "gpus", 12)
		b := buffer(ctx, ns, "warm", cbv1beta1.CapacityBufferSpec{PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: ptr.To[int32](2)})
		cond := expectBufferCondition(ctx, b, cbv1beta1.ConditionLimitedByQuotas, metav1.ConditionTrue, cbv1beta1.ReasonResourceQuotasAllocated)
		Expect(cond.Message).To(And(ContainSubstring("from 2 to 1"), ContainSubstring(q.Name)))
		Expect(b.Status.Replicas).To(HaveValue(Equal(int32(1))))

		By("a larger quota lifts the cap")
		q.Spec.Hard = gpuHard(16)
		Expect(env.Client.Update(ctx, q)).To(Succeed())
		q.Status.Hard = gpuHard(16)
		Expect(env.Client.Status().Update(ctx, q)).To(Succeed())
		expectBufferCondition(ctx, b, cbv1beta1.ConditionLimitedByQuotas, metav1.ConditionFalse, cbv1beta1.ReasonResourceQuotasAllocated)
		Expect(b.Status.Replicas).To(HaveValue(Equal(int32(2))))
	})
})

// buffer creates a CapacityBuffer.
func buffer(ctx context.Context, ns, name string, spec cbv1beta1.CapacityBufferSpec) *cbv1beta1.CapacityBuffer {
	b := &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	Expect(env.Client.Create(ctx, b)).To(Succeed())
	return b
}

// getBuffer reads b from the API server into b.
func getBuffer(ctx context.Context, g Gomega, b *cbv1beta1.CapacityBuffer) *cbv1beta1.CapacityBuffer {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	return b
}

// expectBufferCondition waits until the buffer has the condition with
// status and reason, and returns it.
func expectBufferCondition(ctx context.Context, b *cbv1beta1.CapacityBuffer, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	var c *metav1.Condition
	Eventually(func(g Gomega) {
		c = apimeta.FindStatusCondition(getBuffer(ctx, g, b).Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "condition %s", typ)
		g.Expect(c.Status).To(Equal(status), "condition %s: %s", typ, c.Message)
		g.Expect(c.Reason).To(Equal(reason), "condition %s: %s", typ, c.Message)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return c
}

// realPod creates a running pod of n GPUs bound to node, as
// kube-scheduler would bind a workload's replica.
func realPod(ctx context.Context, ns, node string, n int64) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "replica-"},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "server", Image: "registry.example.com/server:latest",
				Resources: corev1.ResourceRequirements{Requests: gpus(n), Limits: corev1.ResourceList{
					controlplane.GPUResource: *resource.NewQuantity(n, resource.DecimalSI),
				}},
			}},
		},
	}
	Expect(env.Client.Create(ctx, p)).To(Succeed())
}

// deployment creates a Deployment of replicas pods of 8 GPUs pinned to
// the case's nodes; nothing runs it in this plane.
func deployment(ctx context.Context, ns, name, caseID string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{caseLabel: caseID},
					Containers: []corev1.Container{{
						Name: "server", Image: "registry.example.com/server:latest",
						Resources: corev1.ResourceRequirements{Requests: gpus(8), Limits: corev1.ResourceList{
							controlplane.GPUResource: *resource.NewQuantity(8, resource.DecimalSI),
						}},
					}},
				},
			},
		},
	}
	Expect(env.Client.Create(ctx, d)).To(Succeed())
	return d
}

func gpuHard(n int64) corev1.ResourceList {
	return corev1.ResourceList{"requests." + controlplane.GPUResource: *resource.NewQuantity(n, resource.DecimalSI)}
}

// gpuQuota creates a ResourceQuota of n GPUs and writes its status as the
// quota controller would (this plane runs none).
func gpuQuota(ctx context.Context, ns, name string, n int64) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: gpuHard(n)}}
	Expect(env.Client.Create(ctx, q)).To(Succeed())
	q.Status.Hard = gpuHard(n)
	q.Status.Used = gpuHard(0)
	Expect(env.Client.Status().Update(ctx, q)).To(Succeed())
	return q
}
