// Package rayjob adapts KubeRay RayJobs (ray.io/v1) to berth: a whole
// RayJob is one gang — its Ray cluster's head, each worker group, and the
// submitter pod that runs `ray job submit` — held and released through the
// RayJob's own spec.suspend. KubeRay creates the RayCluster only once the
// RayJob is resumed and deletes it when the RayJob is suspended again, so
// an evicted RayJob frees its pods the way KubeRay suspends it. berth gives
// the head's and each worker group's pod template (and the submitter's,
// when the RayJob declares one) the node selector and tolerations of the
// admitted flavor while the RayJob is suspended; KubeRay copies them into
// the cluster it creates. A cluster the Ray autoscaler sizes is admitted
// at its minimum and held there (see package raycluster).
package rayjob

import (
	"context"
	"fmt"
	"maps"
	"math"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/raycluster"
)

const (
	// HeadPodSet is the pod set of the Ray head.
	HeadPodSet = raycluster.HeadPodSet
	// SubmitterPodSet is the pod set of the submitter Job's pod
	// (submissionMode K8sJobMode, KubeRay's default).
	SubmitterPodSet = "submitter"
	// maxPodSets is the Workload API's limit on pod sets.
	maxPodSets = 8
)

// submitterRequests are what KubeRay's default submitter container requests
// (common.GetDefaultSubmitterContainer in ray-operator v1.6.0): the
// submitter pod of a RayJob without submitterPodTemplate, and the sidecar
// SidecarMode adds to the head pod.
func submitterRequests() corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("200Mi")}
}

// Kind is the jobs.Kind of RayJobs.
type Kind struct{}

var (
	_ jobs.Kind          = Kind{}
	_ jobs.ChildVerifier = Kind{}
)

// Labels KubeRay sets on the RayCluster and the submitter Job it creates
// for a RayJob (utils.RayOriginatedFromCRNameLabelKey and
// RayOriginatedFromCRDLabelKey in ray-operator v1.6.0).
const (
	originNameLabel = "ray.io/originated-from-cr-name"
	originKindLabel = "ray.io/originated-from-crd"
)

// IsChild reports whether child is an object KubeRay makes for the RayJob
// parent: its RayCluster, named as the RayJob's status records, or its
// submitter Job, named after the RayJob — either labelled as KubeRay
// labels them. Their pods carry berth's gang labels from the RayJob's
// templates, and the pod webhook accepts them through this check; an
// object that only points its controller reference at an admitted RayJob
// is not one of them.
func (Kind) IsChild(parent, child client.Object) bool {
	rj, ok := parent.(*rayv1.RayJob)
	if !ok {
		return false
	}
	l := child.GetLabels()
	if l[originNameLabel] != rj.Name || l[originKindLabel] != "RayJob" {
		return false
	}
	// Each name is good for one kind only: a RayCluster named after the
	// RayJob (the submitter's name) would otherwise pass for its cluster,
	// and its pods run under the RayJob's admission beside the real one.
	switch childKind(child) {
	case "RayCluster":
		return rj.Status.RayClusterName != "" && child.GetName() == rj.Status.RayClusterName
	case "Job":
		return child.GetName() == rj.Name
	}
	return false
}

// childKind is the kind of a RayJob's child: from its Go type, or from the
// kind it carries (metadata read on its own, as the pod webhook reads a
// pod's controller).
func childKind(child client.Object) string {
	switch child.(type) {
	case *rayv1.RayCluster:
		return "RayCluster"
	case *batchv1.Job:
		return "Job"
	}
	gvk := child.GetObjectKind().GroupVersionKind()
	switch {
	case gvk.Group == rayv1.GroupVersion.Group && gvk.Kind == "RayCluster":
		return "RayCluster"
	case gvk.Group == batchv1.SchemeGroupVersion.Group && gvk.Kind == "Job":
		return "Job"
	}
	return ""
}

// GVK of ray.io/v1 RayJob.
func (Kind) GVK() schema.GroupVersionKind { return rayv1.GroupVersion.WithKind("RayJob") }

// NewObject returns an empty RayJob.
func (Kind) NewObject() client.Object { return &rayv1.RayJob{} }

// Wrap returns the GenericJob of a RayJob.
func (Kind) Wrap(obj client.Object) jobs.GenericJob { return &RayJob{obj.(*rayv1.RayJob)} }

// RayJob is a RayJob seen as a GenericJob.
type RayJob struct{ *rayv1.RayJob }

// Object returns the RayJob.
func (j *RayJob) Object() client.Object { return j.RayJob }

// PodSets returns the head, one pod set per worker group, and the submitter.
// A worker group runs the replicas KubeRay would create for it — replicas
// within [minReplicas, maxReplicas], none when suspended — times
// numOfHosts; with the Ray autoscaler on, berth admits (and the RayCluster
// webhook holds) its minimum.
func (j *RayJob) PodSets() ([]berthv1.PodSet, error) {
	if err := j.shape(); err != nil {
		return nil, err
	}
	cs := j.Spec.RayClusterSpec
	head := jobs.PodRequests(&cs.HeadGroupSpec.Template.Spec)
	if j.Spec.SubmissionMode == rayv1.SidecarMode {
		head = jobs.AddRequests(head, submitterRequests())
	}
	out := []berthv1.PodSet{{Name: HeadPodSet, Count: 1, Requests: head}}
	for i := range cs.WorkerGroupSpecs {
		g := &cs.WorkerGroupSpecs[i]
		n := raycluster.AdmittedWorkers(g, j.autoscaling())
		if n == 0 {
			continue
		}
		if n > math.MaxInt32 {
			return nil, fmt.Errorf("worker group %q runs %d pods (replicas × numOfHosts), more than berth can count (%d): lower replicas or numOfHosts",
				g.GroupName, n, math.MaxInt32)
		}
		out = append(out, berthv1.PodSet{Name: g.GroupName, Count: int32(n), Requests: jobs.PodRequests(&g.Template.Spec)})
	}
	if j.hasSubmitterPod() {
		reqs := submitterRequests()
		if t := j.Spec.SubmitterPodTemplate; t != nil {
			reqs = jobs.PodRequests(&t.Spec)
		}
		out = append(out, berthv1.PodSet{Name: SubmitterPodSet, Count: 1, Requests: reqs})
	}
	if len(out) > maxPodSets {
		return nil, fmt.Errorf("the RayJob runs %d pod sets (the head, %d worker groups and the submitter); berth admits at most %d per gang: merge worker groups",
			len(out), len(out)-1-btoi(j.hasSubmitterPod()), maxPodSets)
	}
	return out, nil
}

// shape reports what keeps berth from queueing the RayJob as it is, in
// words a user can act on; the validating webhook refuses the same.
func (j *RayJob) shape() error {
	if len(j.Spec.ClusterSelector) > 0 {
		return fmt.Errorf("the RayJob runs on an existing RayCluster (spec.clusterSelector): berth queues a RayJob with its own cluster; queue that RayCluster instead, or set spec.rayClusterSpec")
	}
	cs := j.Spec.RayClusterSpec
	if cs == nil {
		return fmt.Errorf("the RayJob has no spec.rayClusterSpec: berth queues a RayJob with its own cluster")
	}
	if !j.Spec.ShutdownAfterJobFinishes {
		return fmt.Errorf("spec.shutdownAfterJobFinishes is false: KubeRay suspends, and berth queues, only a RayJob that deletes its cluster when it ends; set it to true")
	}
	seen := map[string]bool{HeadPodSet: true, SubmitterPodSet: true}
	for _, g := range cs.WorkerGroupSpecs {
		if seen[g.GroupName] {
			return fmt.Errorf("worker group %q: the name is taken by another group or by berth's %q and %q pod sets; rename the group", g.GroupName, HeadPodSet, SubmitterPodSet)
		}
		seen[g.GroupName] = true
	}
	return nil
}

// autoscaling reports whether the Ray autoscaler sizes the cluster's
// worker groups: berth then admits and holds them at their minimum.
func (j *RayJob) autoscaling() bool {
	return j.Spec.RayClusterSpec != nil && ptr.Deref(j.Spec.RayClusterSpec.EnableInTreeAutoscaling, false)
}

// hasSubmitterPod reports whether KubeRay runs the submission in a Job of
// its own: in K8sJobMode, the default.
func (j *RayJob) hasSubmitterPod() bool {
	m := j.Spec.SubmissionMode
	return m == "" || m == rayv1.K8sJobMode
}

// PodTemplates returns the pod template of each pod set, with the labels
// KubeRay adds to the cluster's pods; a submitter without a template of
// its own has KubeRay's default one, of which berth knows the requests
// only.
func (j *RayJob) PodTemplates() []jobs.PodSetTemplate {
	cs := j.Spec.RayClusterSpec
	if cs == nil {
		return nil
	}
	withLabels := func(t *corev1.PodTemplateSpec, group string) map[string]string {
		l := maps.Clone(t.Labels)
		if l == nil {
			l = map[string]string{}
		}
		if j.Status.RayClusterName != "" {
			l[raycluster.ClusterLabel] = j.Status.RayClusterName
		}
		l[raycluster.GroupLabel] = group
		return l
	}
	out := []jobs.PodSetTemplate{{Name: HeadPodSet, Labels: withLabels(&cs.HeadGroupSpec.Template, raycluster.HeadGroup), Spec: &cs.HeadGroupSpec.Template.Spec}}
	for i := range cs.WorkerGroupSpecs {
		g := &cs.WorkerGroupSpecs[i]
		if raycluster.AdmittedWorkers(g, j.autoscaling()) == 0 {
			continue
		}
		out = append(out, jobs.PodSetTemplate{Name: g.GroupName, Labels: withLabels(&g.Template, g.GroupName), Spec: &g.Template.Spec})
	}
	if j.hasSubmitterPod() {
		spec, labels := defaultSubmitter(cs), map[string]string(nil)
		if t := j.Spec.SubmitterPodTemplate; t != nil {
			spec, labels = &t.Spec, maps.Clone(t.Labels)
		}
		out = append(out, jobs.PodSetTemplate{Name: SubmitterPodSet, Labels: labels, Spec: spec})
	}
	return out
}

// defaultSubmitter is the pod of KubeRay's default submitter template as far
// as berth needs it: its container with the head's image (as KubeRay builds
// it) and its requests. It must be a valid pod spec: a booking's
// PodTemplate is made from it, and the API server refuses a container
// without an image.
func defaultSubmitter(cs *rayv1.RayClusterSpec) *corev1.PodSpec {
	c := corev1.Container{Name: "ray-job-submitter", Resources: corev1.ResourceRequirements{Requests: submitterRequests()}}
	if ctrs := cs.HeadGroupSpec.Template.Spec.Containers; len(ctrs) > 0 {
		c.Image = ctrs[0].Image
	}
	return &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c}}
}

// IsSuspended reports whether spec.suspend is true.
func (j *RayJob) IsSuspended() bool { return j.Spec.Suspend }

// Suspend sets spec.suspend; KubeRay deletes the cluster and the submitter.
func (j *RayJob) Suspend() { j.Spec.Suspend = true }

// Resume clears spec.suspend; KubeRay creates the cluster.
func (j *RayJob) Resume() { j.Spec.Suspend = false }

// templates returns the pod template of each pod set berth can place, by
// pod set name: the head, the worker groups, and the submitter when the
// RayJob declares its template (KubeRay's default one is built when the
// submitter Job is created, and berth cannot reach it).
func (j *RayJob) templates() map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	cs := j.Spec.RayClusterSpec
	if cs == nil {
		return out
	}
	out[HeadPodSet] = &cs.HeadGroupSpec.Template
	for i := range cs.WorkerGroupSpecs {
		out[cs.WorkerGroupSpecs[i].GroupName] = &cs.WorkerGroupSpecs[i].Template
	}
	if t := j.Spec.SubmitterPodTemplate; t != nil && j.hasSubmitterPod() {
		out[SubmitterPodSet] = t
	}
	return out
}

// Scheduling returns each placeable pod set's node selector, tolerations and
// berth's labels and annotations, in the order of PodSets.
func (j *RayJob) Scheduling() []jobs.PodSetScheduling {
	ts := j.templates()
	var out []jobs.PodSetScheduling
	for _, name := range j.podSetNames() {
		if t, ok := ts[name]; ok {
			out = append(out, jobs.TemplateScheduling(name, t))
		}
	}
	return out
}

// podSetNames are the names of the pod sets, in the order of PodSets.
func (j *RayJob) podSetNames() []string {
	cs := j.Spec.RayClusterSpec
	if cs == nil {
		return nil
	}
	out := []string{HeadPodSet}
	for i := range cs.WorkerGroupSpecs {
		if raycluster.AdmittedWorkers(&cs.WorkerGroupSpecs[i], j.autoscaling()) > 0 {
			out = append(out, cs.WorkerGroupSpecs[i].GroupName)
		}
	}
	if j.hasSubmitterPod() {
		out = append(out, SubmitterPodSet)
	}
	return out
}

// SetScheduling sets the node selector, tolerations, labels and
// annotations of the named pod sets' templates; KubeRay builds the cluster
// from them when the RayJob is resumed.
func (j *RayJob) SetScheduling(s []jobs.PodSetScheduling) {
	ts := j.templates()
	for _, ps := range s {
		if t, ok := ts[ps.Name]; ok {
			jobs.ApplyScheduling(t, ps)
		}
	}
}

// IsActive reports whether KubeRay may still run pods of the RayJob: from
// the moment it starts initializing the cluster until it reports the RayJob
// suspended (the cluster and the submitter deleted).
func (j *RayJob) IsActive() bool {
	switch j.Status.JobDeploymentStatus {
	case rayv1.JobDeploymentStatusNew, rayv1.JobDeploymentStatusSuspended:
		return false
	}
	return true
}

// Finished reports KubeRay's terminal deployment states: Complete (the Ray
// job succeeded, or ended otherwise), Failed, and ValidationFailed.
func (j *RayJob) Finished() (bool, bool, string) {
	msg := j.Status.Message
	switch j.Status.JobDeploymentStatus {
	case rayv1.JobDeploymentStatusComplete:
		if j.Status.JobStatus == rayv1.JobStatusSucceeded {
			return true, true, "the RayJob succeeded"
		}
		return true, false, fmt.Sprintf("the RayJob ended with Ray job status %s: %s", j.Status.JobStatus, msg)
	case rayv1.JobDeploymentStatusFailed:
		return true, false, fmt.Sprintf("the RayJob failed (%s): %s", j.Status.Reason, msg)
	case rayv1.JobDeploymentStatusValidationFailed:
		return true, false, fmt.Sprintf("KubeRay refused the RayJob: %s", msg)
	}
	return false, false, ""
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// +kubebuilder:webhook:path=/mutate-ray-io-v1-rayjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=ray.io,resources=rayjobs,verbs=create,versions=v1,name=mrayjob.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`

// Defaulter holds every RayJob submitted to a berth queue: it sets
// spec.suspend on creation, so that KubeRay creates no cluster before
// admission.
type Defaulter struct{}

// Default suspends a RayJob that carries the queue-name label, and starts
// an autoscaling cluster's worker groups at their minimum, the size berth
// admits.
func (Defaulter) Default(_ context.Context, rj *rayv1.RayJob) error {
	if _, ok := rj.Labels[berthv1.QueueNameLabel]; ok {
		rj.Spec.Suspend = true
		if cs := rj.Spec.RayClusterSpec; cs != nil {
			raycluster.StartAtMinimum(cs)
		}
	}
	return nil
}

// +kubebuilder:rbac:groups=ray.io,resources=rayjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs/finalizers,verbs=update
