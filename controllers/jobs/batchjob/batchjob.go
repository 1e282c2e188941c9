// Package batchjob adapts batch/v1 Jobs to berth: a Job is one gang of
// min(parallelism, completions) pods, in NonIndexed and Indexed completion
// mode alike (an Indexed Job's pods all start together, one per index, up to
// parallelism). Changing parallelism resizes the gang: see jobs.Reconciler.
package batchjob

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// PodSetName is the name of a Job's only pod set.
const PodSetName = "main"

// Kind is the jobs.Kind of batch/v1 Jobs.
type Kind struct{}

var _ jobs.Kind = Kind{}

// GVK of batch/v1 Job.
func (Kind) GVK() schema.GroupVersionKind { return batchv1.SchemeGroupVersion.WithKind("Job") }

// NewObject returns an empty Job.
func (Kind) NewObject() client.Object { return &batchv1.Job{} }

// Wrap returns the GenericJob of a Job.
func (Kind) Wrap(obj client.Object) jobs.GenericJob { return &Job{obj.(*batchv1.Job)} }

// Job is a batch/v1 Job seen as a GenericJob.
type Job struct{ *batchv1.Job }

// Object returns the Job.
func (j *Job) Object() client.Object { return j.Job }

// PodSets returns the Job's single pod set.
func (j *Job) PodSets() ([]berthv1.PodSet, error) {
	count := gangSize(j.Job)
	if count < 1 {
		return nil, fmt.Errorf("the Job runs no pods (parallelism %d, completions %v): set parallelism to at least 1",
			ptr.Deref(j.Spec.Parallelism, 1), ptr.Deref(j.Spec.Completions, -1))
	}
	return []berthv1.PodSet{{
		Name:     PodSetName,
		Count:    count,
		Requests: jobs.PodRequests(&j.Spec.Template.Spec),
	}}, nil
}

// gangSize is the pods of job that run at once: min(parallelism,
// completions).
func gangSize(job *batchv1.Job) int32 {
	count := ptr.Deref(job.Spec.Parallelism, 1)
	if c := job.Spec.Completions; c != nil && *c < count {
		count = *c
	}
	return count
}

// PodTemplates returns the Job's pod template.
func (j *Job) PodTemplates() []jobs.PodSetTemplate {
	// The API adds the job-name labels to the template itself.
	return []jobs.PodSetTemplate{{Name: PodSetName, Labels: j.Spec.Template.Labels, Spec: &j.Spec.Template.Spec}}
}

// IsSuspended reports whether spec.suspend is true.
func (j *Job) IsSuspended() bool { return ptr.Deref(j.Spec.Suspend, false) }

// Suspend sets spec.suspend.
func (j *Job) Suspend() { j.Spec.Suspend = ptr.To(true) }

// Resume clears spec.suspend.
func (j *Job) Resume() { j.Spec.Suspend = ptr.To(false) }

// Scheduling returns the pod template's node selector and tolerations.
func (j *Job) Scheduling() []jobs.PodSetScheduling {
	return []jobs.PodSetScheduling{{
		Name:         PodSetName,
		NodeSelector: j.Spec.Template.Spec.NodeSelector,
		Tolerations:  j.Spec.Template.Spec.Tolerations,
		Labels:       jobs.ManagedLabels(j.Spec.Template.Labels),
		Annotations:  jobs.ProvisioningAnnotations(j.Spec.Template.Annotations),
	}}
}

// SetScheduling sets the pod template's node selector and tolerations.
func (j *Job) SetScheduling(s []jobs.PodSetScheduling) {
	for _, ps := range s {
		if ps.Name == PodSetName {
			j.Spec.Template.Spec.NodeSelector = ps.NodeSelector
			j.Spec.Template.Spec.Tolerations = ps.Tolerations
			j.Spec.Template.Labels = jobs.SetLabels(j.Spec.Template.Labels, ps.Labels)
			j.Spec.Template.Annotations = jobs.SetAnnotations(j.Spec.Template.Annotations, ps.Annotations)
		}
	}
}

// IsActive reports whether pods of the Job still run or terminate.
func (j *Job) IsActive() bool {
	return j.Status.Active > 0 || ptr.Deref(j.Status.Terminating, 0) > 0
}

// Finished reports the Job's Complete or Failed condition.
func (j *Job) Finished() (bool, bool, string) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true, "the Job completed"
		case batchv1.JobFailed:
			return true, false, fmt.Sprintf("the Job failed: %s", c.Message)
		}
	}
	return false, false, ""
}

// HasOwnGang reports whether the Job has spec.scheduling: kube-apiserver
// keeps it only with the WorkloadWithJob gate on, and the Job controller
// then makes the Job's PodGroup and names it in every pod it creates.
func (j *Job) HasOwnGang() bool { return j.Spec.Scheduling != nil }

// SetGangSize sets the gang minCount of spec.scheduling to pods when the
// Job asks for a gang; a Job that asks for basic scheduling keeps it.
func (j *Job) SetGangSize(pods int32) {
	if s := j.Spec.Scheduling; s != nil && s.SchedulingPolicy != nil && s.SchedulingPolicy.Gang != nil {
		s.SchedulingPolicy.Gang.MinCount = ptr.To(pods)
	}
}

// +kubebuilder:webhook:path=/mutate-batch-v1-job,mutating=true,failurePolicy=fail,sideEffects=None,groups=batch,resources=jobs,verbs=create,versions=v1,name=mjob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`

// Defaulter holds every Job submitted to a berth queue: it sets
// spec.suspend on creation, so that no pod exists before admission.
type Defaulter struct {
	// Gang is set when berth hands admitted gangs to kube-scheduler
	// (setup.Options.PodGroups): a queued Job of two or more pods then
	// asks for a gang of all of them in spec.scheduling.
	Gang bool
}

// Default suspends a Job that carries the queue-name label and, with Gang,
// asks for its gang.
//
// With the WorkloadWithJob gate on, the Job controller makes a PodGroup
// for every Job without a controller owner (at its first sync, whether
// suspended or not) and names it in every pod: a group berth made would
// never be joined, so the Job's own must be the gang. spec.scheduling can
// only be set at creation, and kube-apiserver drops it with the gate off,
// where berth's own group serves (jobs.OwnGang). A Job that already says
// how it is scheduled (spec.scheduling, or a group in its template), or
// whose controller is another object's (a JobSet's Job joins its parent's
// group), is left as it is.
func (d Defaulter) Default(_ context.Context, job *batchv1.Job) error {
	if _, ok := job.Labels[berthv1.QueueNameLabel]; !ok {
		return nil
	}
	job.Spec.Suspend = ptr.To(true)
	pods := gangSize(job)
	if d.Gang && pods > 1 && job.Spec.Scheduling == nil && job.Spec.Template.Spec.SchedulingGroup == nil &&
		metav1.GetControllerOf(job) == nil {
		job.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
			Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To(pods)}}}
	}
	return nil
}

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs/finalizers,verbs=update
