// Package builders makes the objects tests need in one readable line each:
// ResourceFlavors, ClusterQueues, LocalQueues, GPU Jobs and Workloads, with the
// defaults a test does not care about already filled in.
package builders

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// GPU is the extended resource name of NVIDIA GPUs.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// Flavor returns a ResourceFlavor with the given node labels.
func Flavor(name string, nodeLabels map[string]string) *berthv1.ResourceFlavor {
	return &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: berthv1.ResourceFlavorSpec{NodeLabels: nodeLabels}}
}

// ClusterQueueBuilder builds a ClusterQueue.
type ClusterQueueBuilder struct{ cq berthv1.ClusterQueue }

// ClusterQueue starts a ClusterQueue with no quota that every namespace
// may use (an empty namespaceSelector; unset selects none).
func ClusterQueue(name string) *ClusterQueueBuilder {
	return &ClusterQueueBuilder{cq: berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}}}}
}

// Namespaces sets the namespaceSelector; nil selects no namespace.
func (b *ClusterQueueBuilder) Namespaces(sel *metav1.LabelSelector) *ClusterQueueBuilder {
	b.cq.Spec.NamespaceSelector = sel
	return b
}

// Cohort sets the cohort.
func (b *ClusterQueueBuilder) Cohort(c string) *ClusterQueueBuilder { b.cq.Spec.Cohort = c; return b }

// Strategy sets the queueing strategy.
func (b *ClusterQueueBuilder) Strategy(s berthv1.QueueingStrategy) *ClusterQueueBuilder {
	b.cq.Spec.QueueingStrategy = s
	return b
}

// Quota adds one resource group covering resource, with one flavor whose
// nominal quota is nominal; borrowing is optional ("" for none).
func (b *ClusterQueueBuilder) Quota(flavor string, res corev1.ResourceName, nominal, borrowing string) *ClusterQueueBuilder {
	rq := berthv1.ResourceQuota{Name: res, NominalQuota: resource.MustParse(nominal)}
	if borrowing != "" {
		rq.BorrowingLimit = ptr.To(resource.MustParse(borrowing))
	}
	b.cq.Spec.ResourceGroups = append(b.cq.Spec.ResourceGroups, berthv1.ResourceGroup{
		CoveredResources: []corev1.ResourceName{res},
		Flavors:          []berthv1.FlavorQuotas{{Name: flavor, Resources: []berthv1.ResourceQuota{rq}}},
	})
	return b
}

// Obj returns the ClusterQueue.
func (b *ClusterQueueBuilder) Obj() *berthv1.ClusterQueue { return b.cq.DeepCopy() }

// LocalQueue returns a LocalQueue pointing at clusterQueue.
func LocalQueue(namespace, name, clusterQueue string, priorityClasses ...string) *berthv1.LocalQueue {
	return &berthv1.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       berthv1.LocalQueueSpec{ClusterQueue: clusterQueue, PriorityClasses: priorityClasses},
	}
}

// JobBuilder builds a batch/v1 Job.
type JobBuilder struct{ job batchv1.Job }

// Job starts a Job of one pod that requests nothing, submitted to queue
// (no label when queue is empty). Its pods never restart.
func Job(namespace, name, queue string) *JobBuilder {
	j := batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To[int32](1),
			Completions:  ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "registry.invalid/train:latest"}},
			}},
		},
	}
	if queue != "" {
		j.Labels = map[string]string{berthv1.QueueNameLabel: queue}
	}
	return &JobBuilder{job: j}
}

// Pods sets parallelism and completions.
func (b *JobBuilder) Pods(n int32) *JobBuilder {
	b.job.Spec.Parallelism, b.job.Spec.Completions = ptr.To(n), ptr.To(n)
	return b
}

// Request sets a per-pod request of the main container.
func (b *JobBuilder) Request(res corev1.ResourceName, q string) *JobBuilder {
	c := &b.job.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
		c.Resources.Limits = corev1.ResourceList{}
	}
	c.Resources.Requests[res] = resource.MustParse(q)
	if res == GPU { // extended resources need limit == request
		c.Resources.Limits[res] = resource.MustParse(q)
	}
	return b
}

// PodAnnotations sets annotations of the pod template.
func (b *JobBuilder) PodAnnotations(a map[string]string) *JobBuilder {
	b.job.Spec.Template.Annotations = a
	return b
}

// Suspend sets spec.suspend.
func (b *JobBuilder) Suspend(s bool) *JobBuilder { b.job.Spec.Suspend = ptr.To(s); return b }

// Obj returns the Job.
func (b *JobBuilder) Obj() *batchv1.Job { return b.job.DeepCopy() }

// Workload is a Workload of queue "team" with one pod set "node" of pods
// pods, each requesting gpus GPUs; when admitted is set, ClusterQueue "cq"
// has admitted all of it, through the lifecycle transition the engine
// applies.
func Workload(namespace, name string, pods int32, gpus string, admitted bool) (*berthv1.Workload, error) {
	wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: berthv1.WorkloadSpec{QueueName: "team", PodSets: []berthv1.PodSet{{Name: "node", Count: pods,
			Requests: corev1.ResourceList{GPU: resource.MustParse(gpus)}}}}}
	if !admitted {
		return wl, nil
	}
	a := &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: "node", Count: pods}}}
	if err := lifecycle.Apply(wl, lifecycle.Admit{Admission: a, Message: "admitted"}, metav1.Unix(1, 0)); err != nil {
		return nil, fmt.Errorf("admitting workload %s: %w", name, err)
	}
	return wl, nil
}
