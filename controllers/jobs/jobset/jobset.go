// Package jobset adapts JobSets (sigs.k8s.io/jobset) to berth: a whole
// JobSet is one gang, with one pod set per replicated job of
// replicas × min(parallelism, completions) pods. berth holds and releases it
// through JobSet's own spec.suspend, and gives each replicated job's pod
// template the node selector and tolerations of its admitted flavor; the
// JobSet controller passes both on to its child Jobs.
package jobset

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// maxPodSets is the Workload API's limit on pod sets.
const maxPodSets = 8

// Kind is the jobs.Kind of JobSets.
type Kind struct{}

var (
	_ jobs.Kind          = Kind{}
	_ jobs.ChildVerifier = Kind{}
)

// GVK of jobset.x-k8s.io/v1alpha2 JobSet.
func (Kind) GVK() schema.GroupVersionKind { return jobsetv1.SchemeGroupVersion.WithKind("JobSet") }

// NewObject returns an empty JobSet.
func (Kind) NewObject() client.Object { return &jobsetv1.JobSet{} }

// Wrap returns the GenericJob of a JobSet.
func (Kind) Wrap(obj client.Object) jobs.GenericJob { return &JobSet{obj.(*jobsetv1.JobSet)} }

// IsChild reports whether child is a Job the JobSet controller makes for
// parent: named <jobset>-<replicated job>-<index> for a replicated job of
// parent and an index below its replicas, and labelled so. A tenant can
// point a Job's controller reference at an admitted JobSet, but not take
// the name of one of its Jobs, which the JobSet controller holds; a Job
// that is not one of them is queued on its own.
func (Kind) IsChild(parent, child client.Object) bool {
	js, ok := parent.(*jobsetv1.JobSet)
	if !ok {
		return false
	}
	l := child.GetLabels()
	if l[jobsetv1.JobSetNameKey] != js.Name {
		return false
	}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		if rj.Name != l[jobsetv1.ReplicatedJobNameKey] {
			continue
		}
		for idx := range int(rj.Replicas) {
			if child.GetName() == fmt.Sprintf("%s-%s-%d", js.Name, rj.Name, idx) {
				return l[jobsetv1.JobIndexKey] == strconv.Itoa(idx)
			}
		}
	}
	return false
}

// JobSet is a JobSet seen as a GenericJob.
type JobSet struct{ *jobsetv1.JobSet }

// Object returns the JobSet.
func (j *JobSet) Object() client.Object { return j.JobSet }

// PodSets returns one pod set per replicated job.
func (j *JobSet) PodSets() ([]berthv1.PodSet, error) {
	rjs := j.Spec.ReplicatedJobs
	if len(rjs) == 0 {
		return nil, fmt.Errorf("the JobSet has no replicatedJobs: add at least one")
	}
	if len(rjs) > maxPodSets {
		return nil, fmt.Errorf("the JobSet has %d replicatedJobs; berth admits at most %d pod sets per gang", len(rjs), maxPodSets)
	}
	out := make([]berthv1.PodSet, 0, len(rjs))
	for i := range rjs {
		rj := &rjs[i]
		perJob := podsPerJob(&rj.Template.Spec)
		if rj.Replicas < 1 || perJob < 1 {
			return nil, fmt.Errorf("replicatedJob %q runs no pods (replicas %d, %d pods per Job): set replicas and parallelism to at least 1",
				rj.Name, rj.Replicas, perJob)
		}
		count := int64(rj.Replicas) * int64(perJob)
		if count > math.MaxInt32 {
			return nil, fmt.Errorf("replicatedJob %q runs %d × %d = %d pods, more than berth can count (%d): lower replicas or parallelism",
				rj.Name, rj.Replicas, perJob, count, math.MaxInt32)
		}
		out = append(out, berthv1.PodSet{
			Name:     rj.Name,
			Count:    int32(count),
			Requests: jobs.PodRequests(&rj.Template.Spec.Template.Spec),
		})
	}
	return out, nil
}

// podsPerJob is min(parallelism, completions) of one child Job.
func podsPerJob(spec *batchv1.JobSpec) int32 {
	n := ptr.Deref(spec.Parallelism, 1)
	if c := spec.Completions; c != nil && *c < n {
		n = *c
	}
	return n
}

// PodTemplates returns each replicated job's pod template.
func (j *JobSet) PodTemplates() []jobs.PodSetTemplate {
	out := make([]jobs.PodSetTemplate, 0, len(j.Spec.ReplicatedJobs))
	for i := range j.Spec.ReplicatedJobs {
		rj := &j.Spec.ReplicatedJobs[i]
		labels := maps.Clone(rj.Template.Spec.Template.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		// Set by the JobSet controller on every pod of the replicated job.
		labels[jobsetv1.JobSetNameKey] = j.Name
		labels[jobsetv1.ReplicatedJobNameKey] = rj.Name
		out = append(out, jobs.PodSetTemplate{Name: rj.Name, Labels: labels, Spec: &rj.Template.Spec.Template.Spec})
	}
	return out
}

// IsSuspended reports whether spec.suspend is true.
func (j *JobSet) IsSuspended() bool { return ptr.Deref(j.Spec.Suspend, false) }

// Suspend sets spec.suspend; the JobSet controller suspends its Jobs.
func (j *JobSet) Suspend() { j.Spec.Suspend = ptr.To(true) }

// Resume clears spec.suspend.
func (j *JobSet) Resume() { j.Spec.Suspend = ptr.To(false) }

// Scheduling returns each replicated job's node selector and tolerations.
func (j *JobSet) Scheduling() []jobs.PodSetScheduling {
	out := make([]jobs.PodSetScheduling, 0, len(j.Spec.ReplicatedJobs))
	for i := range j.Spec.ReplicatedJobs {
		rj := &j.Spec.ReplicatedJobs[i]
		out = append(out, jobs.PodSetScheduling{
			Name:         rj.Name,
			NodeSelector: rj.Template.Spec.Template.Spec.NodeSelector,
			Tolerations:  rj.Template.Spec.Template.Spec.Tolerations,
			Labels:       jobs.ManagedLabels(rj.Template.Spec.Template.Labels),
			Annotations:  jobs.ProvisioningAnnotations(rj.Template.Spec.Template.Annotations),
		})
	}
	return out
}

// SetScheduling sets the node selector and tolerations of the named
// replicated jobs' pod templates; JobSet allows it while suspended.
func (j *JobSet) SetScheduling(s []jobs.PodSetScheduling) {
	for _, ps := range s {
		for i := range j.Spec.ReplicatedJobs {
			if rj := &j.Spec.ReplicatedJobs[i]; rj.Name == ps.Name {
				rj.Template.Spec.Template.Spec.NodeSelector = ps.NodeSelector
				rj.Template.Spec.Template.Spec.Tolerations = ps.Tolerations
				rj.Template.Spec.Template.Labels = jobs.SetLabels(rj.Template.Spec.Template.Labels, ps.Labels)
				rj.Template.Spec.Template.Annotations = jobs.SetAnnotations(rj.Template.Spec.Template.Annotations, ps.Annotations)
			}
		}
	}
}

// IsActive reports whether a child Job still has running or pending pods.
func (j *JobSet) IsActive() bool {
	for _, s := range j.Status.ReplicatedJobsStatus {
		if s.Active > 0 {
			return true
		}
	}
	return false
}

// Finished reports the JobSet's Completed or Failed condition.
func (j *JobSet) Finished() (bool, bool, string) {
	for _, c := range j.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch jobsetv1.JobSetConditionType(c.Type) {
		case jobsetv1.JobSetCompleted:
			return true, true, "the JobSet completed"
		case jobsetv1.JobSetFailed:
			return true, false, fmt.Sprintf("the JobSet failed: %s", c.Message)
		}
	}
	return false, false, ""
}

// +kubebuilder:webhook:path=/mutate-jobset-x-k8s-io-v1alpha2-jobset,mutating=true,failurePolicy=fail,sideEffects=None,groups=jobset.x-k8s.io,resources=jobsets,verbs=create,versions=v1alpha2,name=mjobset.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`

// Defaulter holds every JobSet submitted to a berth queue: it sets
// spec.suspend on creation, so that no child Job runs a pod before
// admission. A JobSet an operator makes for a queued parent of its own (a
// TrainJob's, labelled with the TrainJob's queue) is left alone: the
// parent is what berth holds, and the Validator keeps the JobSet within
// the parent's admission.
type Defaulter struct {
	// Readers read a JobSet's parent.
	Readers jobs.Workloads
	// Parents are the kinds whose children berth covers (a TrainJob).
	Parents []jobs.Kind
}

// Default suspends a queued JobSet that is not a queued parent's.
func (d Defaulter) Default(ctx context.Context, js *jobsetv1.JobSet) error {
	if _, ok := js.Labels[berthv1.QueueNameLabel]; !ok {
		return nil
	}
	parent, _, err := d.Readers.ParentOf(ctx, js, d.Parents)
	if err != nil || parent != nil {
		return err
	}
	js.Spec.Suspend = ptr.To(true)
	return nil
}

// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets/finalizers,verbs=update
