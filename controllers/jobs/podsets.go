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
