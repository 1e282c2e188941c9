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
//
// A container (or the pod) that states a limit and no request of a
// resource requests its limit: the API server defaults a pod's requests so
// when it creates the pod, but not a template's (SetDefaults_Pod), and
// `limits: {nvidia.com/gpu: 1}` alone is how GPUs are commonly asked for.
// Read as the template says, such a job would be charged no GPU and run
// its pods' GPUs outside quota.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	pod := &corev1.Pod{Spec: *spec}
	pod.Spec.Containers = requestsFromLimits(spec.Containers)
	pod.Spec.InitContainers = requestsFromLimits(spec.InitContainers)
	if r := spec.Resources; r != nil {
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: withLimits(r.Requests, r.Limits), Limits: r.Limits}
	}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range reqs {
		if q.IsZero() {
			delete(reqs, name)
		}
	}
	return reqs
}

// requestsFromLimits returns copies of cs whose requests hold their limits
// where they state none, as the API server defaults a pod's containers.
func requestsFromLimits(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = c
		out[i].Resources.Requests = withLimits(c.Resources.Requests, c.Resources.Limits)
	}
	return out
}

// withLimits is requests with every limit it lacks added: a new list when
// one is added, requests itself otherwise.
func withLimits(requests, limits corev1.ResourceList) corev1.ResourceList {
	out, copied := requests, false
	for name, q := range limits {
		if _, ok := requests[name]; ok {
			continue
		}
		if !copied {
			out, copied = make(corev1.ResourceList, len(requests)+len(limits)), true
			for k, v := range requests {
				out[k] = v.DeepCopy()
			}
		}
		out[name] = q.DeepCopy()
	}
	return out
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

// AddRequests returns a + b, a new list.
func AddRequests(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range b {
		sum := out[name]
		sum.Add(q)
		out[name] = sum
	}
	return out
}

// Defaultable reports whether a namespace's LimitRange may add resource
// name to a pod's containers at the pod's creation: cpu, memory and
// ephemeral storage. A job's template, and so its Workload, does not show
// those, so a pod's figure for them beyond its template's is no growth.
func Defaultable(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage
}

// MemberRequests is what a pod of a pod set asks beyond what the API server
// may add to it at its creation: PodRequests without the pod's overhead (a
// RuntimeClass's) and without the resources a LimitRange defaults
// (Defaultable). A pod set made of its template and its pods is charged
// its template's requests raised to any pod's MemberRequests: a pod of an
// older revision may ask for more GPUs than a template edited since, while
// defaults a pod got at creation would read as growth, and evict a running
// gang as its later pods appear.
func MemberRequests(spec *corev1.PodSpec) corev1.ResourceList {
	s := *spec
	s.Overhead = nil
	reqs := PodRequests(&s)
	for name := range reqs {
		if Defaultable(name) {
			delete(reqs, name)
		}
	}
	return reqs
}
