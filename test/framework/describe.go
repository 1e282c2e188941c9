package framework

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DescribePods says where each pod of the namespaces is and why, for a
// failed expectation's message: phase, node, nomination, deletion and
// the PodScheduled condition.
func DescribePods(ctx context.Context, c client.Reader, namespaces ...string) string {
	var out []string
	for _, ns := range namespaces {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return fmt.Sprintf("listing pods in %s: %v", ns, err)
		}
		for _, p := range pods.Items {
			line := fmt.Sprintf("%s/%s: phase %s, node %q, nominated %q, deleting %v, created %s, node selector %v",
				p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.NominatedNodeName,
				!p.DeletionTimestamp.IsZero(), p.CreationTimestamp.Format("15:04:05"), p.Spec.NodeSelector)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					line += fmt.Sprintf(", scheduled %s %s %s", c.Status, c.Reason, c.Message)
				}
			}
			out = append(out, line)
		}
	}
	return "pods:\n" + strings.Join(out, "\n")
}

// DescribeNodes lists the nodes with their creation time, labels and
// taints, for a failed expectation's message.
func DescribeNodes(ctx context.Context, c client.Reader) string {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return fmt.Sprintf("listing nodes: %v", err)
	}
	out := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		out = append(out, fmt.Sprintf("%s: created %s, labels %v, taints %v", n.Name,
			n.CreationTimestamp.Format("15:04:05"), n.Labels, n.Spec.Taints))
	}
	return "\nnodes:\n" + strings.Join(out, "\n")
}
