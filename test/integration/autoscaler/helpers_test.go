package autoscaler_test

import (
	"context"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/test/controlplane"
)

// caseLabel is on every node and pool template of one spec, and in its
// pods' node selectors, so specs never share capacity.
const caseLabel = "it.berth.dev/case"

// newCase returns a unique value for caseLabel.
func newCase() string { return "c" + rand.String(6) }

// gpus is a resource list of n GPUs plus some cpu and memory per GPU.
func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{
		controlplane.GPUResource: *resource.NewQuantity(n, resource.DecimalSI),
		corev1.ResourceCPU:       *resource.NewQuantity(8*n, resource.DecimalSI),
		corev1.ResourceMemory:    *resource.NewQuantity(64<<30*n, resource.BinarySI),
	}
}

// readyNode creates a node of the case with n GPUs and makes it
// Ready and schedulable as a kubelet and the node-lifecycle controller
// would.
func readyNode(ctx context.Context, name, caseID string, n int64) *corev1.Node {
	node := controlplane.GPUNode(name, int(n), map[string]string{caseLabel: caseID})
	node.Status.Allocatable = gpus(n)
	node.Status.Allocatable[corev1.ResourcePods] = *resource.NewQuantity(110, resource.DecimalSI)
	node.Status.Capacity = node.Status.Allocatable.DeepCopy()
	Expect(env.Client.Create(ctx, node)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
		node.Spec.Taints = nil
		g.Expect(env.Client.Update(ctx, node)).To(Succeed())
		node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
		g.Expect(env.Client.Status().Update(ctx, node)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return node
}

// template creates a PodTemplate of one pod asking for n GPUs, pinned to
// the case's nodes plus selector.
func template(ctx context.Context, ns, name, caseID string, n int64, selector map[string]string) {
	sel := map[string]string{caseLabel: caseID}
	for k, v := range selector {
		sel[k] = v
	}
	t := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: sel,
			Containers: []corev1.Container{{
				Name: "trainer", Image: "registry.example.com/trainer:latest",
				Resources: corev1.ResourceRequirements{Requests: gpus(n), Limits: corev1.ResourceList{
					controlplane.GPUResource: *resource.NewQuantity(n, resource.DecimalSI),
				}},
			}},
		}},
	}
	Expect(env.Client.Create(ctx, t)).To(Succeed())
}

// request creates a ProvisioningRequest of class for count pods of the
// template.
func request(ctx context.Context, ns, name, class, tmpl string, count int32, params map[string]autoscalingv1.Parameter) *autoscalingv1.ProvisioningRequest {
	if params == nil {
		params = map[string]autoscalingv1.Parameter{}
	}
	pr := &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv1.ProvisioningRequestSpec{
			ProvisioningClassName: class,
			PodSets:               []autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: tmpl}, Count: count}},
			Parameters:            params,
		},
	}
	Expect(env.Client.Create(ctx, pr)).To(Succeed())
	return pr
}

// pool creates a CapacityPool of the case whose nodes have 8 GPUs and the
// given labels.
func pool(ctx context.Context, name, caseID string, maxNodes int32, labels, annotations map[string]string) *berthv1.CapacityPool {
	all := map[string]string{caseLabel: caseID}
	for k, v := range labels {
		all[k] = v
	}
	cp := &berthv1.CapacityPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: berthv1.CapacityPoolSpec{
			Flavor:       "h200",
			NodeTemplate: berthv1.NodeTemplate{Labels: all, Allocatable: gpus(8)},
			// The CRD's minNodes <= maxNodes rule needs minNodes present; the
			// autoscaler does not act on it (it never scales down).
			MinNodes: 1,
			MaxNodes: maxNodes,
		},
	}
	Expect(env.Client.Create(ctx, cp)).To(Succeed())
	return cp
}

// condition returns the request's condition of typ, read from the API
// server (nil when absent).
func condition(ctx context.Context, g Gomega, pr *autoscalingv1.ProvisioningRequest, typ string) *metav1.Condition {
	got := &autoscalingv1.ProvisioningRequest{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pr), got)).To(Succeed())
	*pr = *got
	return apimeta.FindStatusCondition(got.Status.Conditions, typ)
}

// expectCondition waits until the request has the condition with status
// (and reason, unless empty) and returns it.
func expectCondition(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	var c *metav1.Condition
	Eventually(func(g Gomega) {
		c = condition(ctx, g, pr, typ)
		g.Expect(c).NotTo(BeNil(), "condition %s", typ)
		g.Expect(c.Status).To(Equal(status), "condition %s: %s", typ, c.Message)
		if reason != "" {
			g.Expect(c.Reason).To(Equal(reason), "condition %s: %s", typ, c.Message)
		}
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return c
}

// poolNodes lists the nodes labelled with the pool.
func poolNodes(ctx context.Context, name string) []corev1.Node {
	nodes := &corev1.NodeList{}
	Expect(env.Client.List(ctx, nodes, client.MatchingLabels{berthv1.CapacityPoolLabel: name})).To(Succeed())
	return nodes.Items
}

// nodeNames are the names of nodes.
func nodeNames(nodes []corev1.Node) []string {
	out := make([]string, len(nodes))
	for i := range nodes {
		out[i] = nodes[i].Name
	}
	return out
}

// consumer creates a pod that consumes the request, bound to node.
func consumer(ctx context.Context, ns, req, node string, n int64) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "consumer-", Annotations: map[string]string{
			autoscalingv1.ProvisioningRequestPodAnnotationKey: req,
			autoscalingv1.ProvisioningClassPodAnnotationKey:   autoscalingv1.ProvisioningClassCheckCapacity,
		}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "trainer", Image: "registry.example.com/trainer:latest",
				Resources: corev1.ResourceRequirements{Requests: gpus(n), Limits: corev1.ResourceList{
					controlplane.GPUResource: *resource.NewQuantity(n, resource.DecimalSI),
				}},
			}},
		},
	}
	Expect(env.Client.Create(ctx, p)).To(Succeed())
}

// expectNoPoolStatus checks that nothing wrote the pool's status: like
// cluster-autoscaler, the stand-in leaves it alone.
func expectNoPoolStatus(ctx context.Context, name string) {
	cp := &berthv1.CapacityPool{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, cp)).To(Succeed())
	Expect(cp.Status).To(Equal(berthv1.CapacityPoolStatus{}))
}

// retries is the number of times the request was answered
// CapacityIsNotFound.
func retries(ctx context.Context, g Gomega, pr *autoscalingv1.ProvisioningRequest) string {
	condition(ctx, g, pr, autoscalingv1.Provisioned)
	return string(pr.Status.ProvisioningClassDetails[autoscaler.DetailRetries])
}
