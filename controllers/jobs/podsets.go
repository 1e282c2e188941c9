package jobs

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests returns what one pod of the template needs, computed as
// kube-scheduler does: the larger of the sum of the containers' (and
// sidecars') requests and each init container's, plus pod overhead and
// pod-level resources. Quota is charged with exactly what the scheduler will
// look for on a node.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	pod := &corev1.Pod{Spec: *spec}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range reqs {
		if q.IsZero() {
			delete(reqs, name)
		}
	}
	return reqs
}

// TemplateScheduling is the scheduling a pod template holds, as pod set
// name: what an adapter's Scheduling returns for a pod set whose pods are
// made from one template.
func TemplateScheduling(name string, t *corev1.PodTemplateSpec) PodSetScheduling {
	return PodSetScheduling{Name: name, NodeSelector: t.Spec.NodeSelector, Tolerations: t.Spec.Tolerations,
		Labels: ManagedLabels(t.Labels), Annotations: ProvisioningAnnotations(t.Annotations)}
}

// ApplyScheduling sets ps's node selector, tolerations, and berth's labels
// and annotations on a pod template: what an adapter's SetScheduling does
// for a pod set whose pods are made from one template.
func ApplyScheduling(t *corev1.PodTemplateSpec, ps PodSetScheduling) {
	t.Spec.NodeSelector = ps.NodeSelector
	t.Spec.Tolerations = ps.Tolerations
	t.Labels = SetLabels(t.Labels, ps.Labels)
	t.Annotations = SetAnnotations(t.Annotations, ps.Annotations)
}
