package framework

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Bind binds pod to node through the binding subresource, as kube-scheduler
// does, and reads the pod back. Suites that stand in for the scheduler use
// it: a pod of an admitted gang created with spec.nodeName already set is
// refused by berth's pod webhook, since naming a node skips the node
// selector and taints of the gang's admission.
func Bind(ctx context.Context, c client.Client, pod *corev1.Pod, node string) error {
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := c.SubResource("binding").Create(ctx, pod, binding); err != nil {
		return fmt.Errorf("binding pod %s/%s to node %s: %w", pod.Namespace, pod.Name, node, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return fmt.Errorf("reading bound pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
