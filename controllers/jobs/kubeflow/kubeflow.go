// Package kubeflow adapts the jobs of the Kubeflow training-operator
// (kubeflow.org/v1) to berth: a PyTorchJob or MPIJob is one gang with one
// pod set per replica type (a PyTorchJob's master and workers, an MPIJob's
// launcher and workers). berth holds and releases it through
// spec.runPolicy.suspend, and gives each replica type's pod template the
// node selector and tolerations of its admitted flavor while the job is
// suspended; the training-operator creates the pods from those templates
// once it is resumed, and deletes them when it is suspended again. The two
// kinds share one implementation over the fields every training-operator
// job has: replica specs, run policy and status.
package kubeflow

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// maxPodSets is the Workload API's limit on pod sets.
const maxPodSets = 8

// Job is a training-operator job seen as a GenericJob. Its fields point
// into the wrapped object, so that changes are made to it.
type Job struct {
	obj    client.Object
	kind   string
	specs  map[kftraining.ReplicaType]*kftraining.ReplicaSpec
	run    *kftraining.RunPolicy
	status *kftraining.JobStatus
	// order lists the kind's replica types, leader first; others follow
	// sorted by name.
	order []kftraining.ReplicaType
}

// Object returns the job's API object.
func (j *Job) Object() client.Object { return j.obj }

// replicaTypes are the job's replica types, in pod set order.
func (j *Job) replicaTypes() []kftraining.ReplicaType {
	out := make([]kftraining.ReplicaType, 0, len(j.specs))
	for _, t := range j.order {
		if _, ok := j.specs[t]; ok {
			out = append(out, t)
		}
	}
	rest := slices.Sorted(maps.Keys(j.specs))
	for _, t := range rest {
		if !slices.Contains(j.order, t) {
			out = append(out, t)
		}
	}
	return out
}

// PodSetName is the pod set of a replica type: its name in lower case.
func PodSetName(t kftraining.ReplicaType) string { return strings.ToLower(string(t)) }

// replicas is how many pods the operator runs for a replica spec: replicas,
// 1 when unset (the operator's default).
func replicas(s *kftraining.ReplicaSpec) int32 {
	if s == nil {
		return 0
	}
	return ptr.Deref(s.Replicas, 1)
}

// PodSets returns one pod set per replica type that runs pods.
func (j *Job) PodSets() ([]berthv1.PodSet, error) {
	var out []berthv1.PodSet
	for _, t := range j.replicaTypes() {
		s := j.specs[t]
		n := replicas(s)
		if n < 0 {
			return nil, fmt.Errorf("replica type %s has %d replicas: set replicas to 0 or more", t, n)
		}
		if n == 0 {
			continue
		}
		out = append(out, berthv1.PodSet{Name: PodSetName(t), Count: n, Requests: jobs.PodRequests(&s.Template.Spec)})
	}
	switch {
	case len(out) == 0:
		return nil, fmt.Errorf("the %s runs no pods: give at least one replica type replicas", j.kind)
	case len(out) > maxPodSets:
		return nil, fmt.Errorf("the %s has %d replica types; berth admits at most %d pod sets per gang", j.kind, len(out), maxPodSets)
	}
	return out, nil
}

// PodTemplates returns each replica type's pod template, with the labels
// the training-operator adds to its pods.
func (j *Job) PodTemplates() []jobs.PodSetTemplate {
	var out []jobs.PodSetTemplate
	for _, t := range j.replicaTypes() {
		s := j.specs[t]
		if replicas(s) == 0 {
			continue
		}
		labels := maps.Clone(s.Template.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[kftraining.JobNameLabel] = j.obj.GetName()
		labels[kftraining.ReplicaTypeLabel] = PodSetName(t)
		out = append(out, jobs.PodSetTemplate{Name: PodSetName(t), Labels: labels, Spec: &s.Template.Spec})
	}
	return out
}

// IsSuspended reports whether spec.runPolicy.suspend is true.
func (j *Job) IsSuspended() bool { return ptr.Deref(j.run.Suspend, false) }

// Suspend sets spec.runPolicy.suspend; the operator deletes the pods.
func (j *Job) Suspend() { j.run.Suspend = ptr.To(true) }

// Resume clears spec.runPolicy.suspend; the operator creates the pods.
func (j *Job) Resume() { j.run.Suspend = ptr.To(false) }

// Scheduling returns each replica type's node selector, tolerations and
// berth's labels and annotations.
func (j *Job) Scheduling() []jobs.PodSetScheduling {
	var out []jobs.PodSetScheduling
	for _, t := range j.replicaTypes() {
		s := j.specs[t]
		if replicas(s) == 0 {
			continue
		}
		out = append(out, jobs.TemplateScheduling(PodSetName(t), &s.Template))
	}
	return out
}

// SetScheduling sets the node selector, tolerations, labels and
// annotations of the named replica types' pod templates.
func (j *Job) SetScheduling(sched []jobs.PodSetScheduling) {
	for _, ps := range sched {
		for t, s := range j.specs {
			if s != nil && PodSetName(t) == ps.Name {
				jobs.ApplyScheduling(&s.Template, ps)
			}
		}
	}
}

// IsActive reports whether any replica type still has active pods.
func (j *Job) IsActive() bool {
	for _, s := range j.status.ReplicaStatuses {
		if s != nil && s.Active > 0 {
			return true
		}
	}
	return false
}

// Finished reports the job's Succeeded or Failed condition.
func (j *Job) Finished() (bool, bool, string) {
	for _, c := range j.status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case kftraining.JobSucceeded:
			return true, true, fmt.Sprintf("the %s succeeded", j.kind)
		case kftraining.JobFailed:
			return true, false, fmt.Sprintf("the %s failed: %s", j.kind, cmp.Or(c.Message, c.Reason))
		}
	}
	return false, false, ""
}

// Defaulter holds every job of kind K submitted to a berth queue: it sets
// spec.runPolicy.suspend on creation, so that the operator creates no pod
// before admission.
type Defaulter[T client.Object] struct {
	// Kind wraps the job.
	Kind jobs.Kind
}

// Default suspends a job that carries the queue-name label.
func (d Defaulter[T]) Default(_ context.Context, obj T) error {
	if _, ok := obj.GetLabels()[berthv1.QueueNameLabel]; ok {
		d.Kind.Wrap(obj).Suspend()
	}
	return nil
}
