// Package raycluster adapts KubeRay RayClusters (ray.io/v1) to berth: a
// RayCluster is one gang — its head and each worker group — held and
// released through spec.suspend. A cluster runs until it is deleted, as a
// serving set does, so its quota is released when it is deleted (or
// shrunk). A cluster with the Ray autoscaler on is admitted at its minimum
// (minReplicas × numOfHosts per group) and held there: berth has no
// elastic admission, so the webhook refuses the autoscaler's changes to the
// groups' sizes rather than let it add workers outside quota. A RayCluster
// that KubeRay makes for a queued RayJob is the RayJob's: it is neither
// held nor queued on its own, and the webhook refuses growing it beyond
// what the RayJob's Workload admitted.
package raycluster

import (
	"fmt"
	"maps"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

const (
	// HeadPodSet is the pod set of the Ray head.
	HeadPodSet = "head"
	// ClusterLabel is the label KubeRay sets on every pod of a cluster to
	// the cluster's name.
	ClusterLabel = "ray.io/cluster"
	// GroupLabel is the label KubeRay sets on every pod of a cluster to its
	// group: a worker group's name, or HeadGroup.
	GroupLabel = "ray.io/group"
	// HeadGroup is the group of the head's pod.
	HeadGroup = "headgroup"
	// maxPodSets is the Workload API's limit on pod sets.
	maxPodSets = 8
)

// DesiredWorkers is how many pods KubeRay runs for a worker group
// (utils.GetWorkerGroupDesiredReplicas in ray-operator v1.6.0): none when
// the group is suspended; otherwise replicas raised to minReplicas and
// capped at maxReplicas, times numOfHosts (the CRD defaults it to 1).
func DesiredWorkers(g *rayv1.WorkerGroupSpec) int64 {
	if ptr.Deref(g.Suspend, false) {
		return 0
	}
	lo := ptr.Deref(g.MinReplicas, 0)
	hi := ptr.Deref(g.MaxReplicas, math.MaxInt32)
	n := lo
	if r := g.Replicas; r != nil && *r >= lo {
		n = min(*r, hi)
	}
	return int64(max(n, 0)) * int64(max(g.NumOfHosts, 0))
}

// Kind is the jobs.Kind of RayClusters.
type Kind struct{}

var _ jobs.Kind = Kind{}

// GVK of ray.io/v1 RayCluster.
func (Kind) GVK() schema.GroupVersionKind { return rayv1.GroupVersion.WithKind("RayCluster") }

// NewObject returns an empty RayCluster.
func (Kind) NewObject() client.Object { return &rayv1.RayCluster{} }

// Wrap returns the GenericJob of a RayCluster.
func (Kind) Wrap(obj client.Object) jobs.GenericJob { return &RayCluster{obj.(*rayv1.RayCluster)} }

// RayCluster is a RayCluster seen as a GenericJob.
type RayCluster struct{ *rayv1.RayCluster }

// Object returns the RayCluster.
func (c *RayCluster) Object() client.Object { return c.RayCluster }

// autoscaling reports whether the Ray autoscaler sizes the worker groups.
func (c *RayCluster) autoscaling() bool { return ptr.Deref(c.Spec.EnableInTreeAutoscaling, false) }

// groupPods is how many pods berth admits for a worker group of c.
func (c *RayCluster) groupPods(g *rayv1.WorkerGroupSpec) int64 {
	return AdmittedWorkers(g, c.autoscaling())
}

// AdmittedWorkers is how many pods berth admits for a worker group: what
// KubeRay runs, and for a cluster the Ray autoscaler sizes its minimum
// (minReplicas × numOfHosts), at which berth starts and holds it.
func AdmittedWorkers(g *rayv1.WorkerGroupSpec, autoscaling bool) int64 {
	if autoscaling && !ptr.Deref(g.Suspend, false) {
		return int64(max(ptr.Deref(g.MinReplicas, 0), 0)) * int64(max(g.NumOfHosts, 0))
	}
	return DesiredWorkers(g)
}

// StartAtMinimum sets each worker group of an autoscaling cluster spec to
// its minimum, the size berth admits, so that KubeRay starts it there.
func StartAtMinimum(cs *rayv1.RayClusterSpec) {
	if !ptr.Deref(cs.EnableInTreeAutoscaling, false) {
		return
	}
	for i := range cs.WorkerGroupSpecs {
		g := &cs.WorkerGroupSpecs[i]
		g.Replicas = ptr.To(ptr.Deref(g.MinReplicas, 0))
	}
}

// PodSets returns the head and one pod set per worker group that runs pods.
func (c *RayCluster) PodSets() ([]berthv1.PodSet, error) {
	seen := map[string]bool{HeadPodSet: true}
	out := []berthv1.PodSet{{Name: HeadPodSet, Count: 1, Requests: jobs.PodRequests(&c.Spec.HeadGroupSpec.Template.Spec)}}
	for i := range c.Spec.WorkerGroupSpecs {
		g := &c.Spec.WorkerGroupSpecs[i]
		if seen[g.GroupName] {
			return nil, fmt.Errorf("worker group %q: the name is taken by another group or by berth's %q pod set; rename the group", g.GroupName, HeadPodSet)
		}
		seen[g.GroupName] = true
		n := c.groupPods(g)
		if n > math.MaxInt32 {
			return nil, fmt.Errorf("worker group %q runs %d pods (replicas × numOfHosts), more than berth can count (%d): lower replicas or numOfHosts",
				g.GroupName, n, math.MaxInt32)
		}
		if n > 0 {
			out = append(out, berthv1.PodSet{Name: g.GroupName, Count: int32(n), Requests: jobs.PodRequests(&g.Template.Spec)})
		}
	}
	if len(out) > maxPodSets {
		return nil, fmt.Errorf("the RayCluster runs %d pod sets (the head and %d worker groups); berth admits at most %d per gang: merge worker groups",
			len(out), len(out)-1, maxPodSets)
	}
	return out, nil
}

// templates returns the pod template of each pod set, by name, in order.
func (c *RayCluster) templates() ([]string, map[string]*corev1.PodTemplateSpec) {
	names := []string{HeadPodSet}
	out := map[string]*corev1.PodTemplateSpec{HeadPodSet: &c.Spec.HeadGroupSpec.Template}
	for i := range c.Spec.WorkerGroupSpecs {
		g := &c.Spec.WorkerGroupSpecs[i]
		if c.groupPods(g) > 0 {
			names = append(names, g.GroupName)
			out[g.GroupName] = &g.Template
		}
	}
	return names, out
}

// PodTemplates returns each pod set's template, with the labels KubeRay
// adds to the cluster's pods.
func (c *RayCluster) PodTemplates() []jobs.PodSetTemplate {
	names, ts := c.templates()
	out := make([]jobs.PodSetTemplate, 0, len(names))
	for _, name := range names {
		t := ts[name]
		l := maps.Clone(t.Labels)
		if l == nil {
			l = map[string]string{}
		}
		l[ClusterLabel] = c.Name
		l[GroupLabel] = name
		if name == HeadPodSet {
			l[GroupLabel] = HeadGroup
		}
		out = append(out, jobs.PodSetTemplate{Name: name, Labels: l, Spec: &t.Spec})
	}
	return out
}

// IsSuspended reports whether spec.suspend is true.
func (c *RayCluster) IsSuspended() bool { return ptr.Deref(c.Spec.Suspend, false) }

// Suspend sets spec.suspend; KubeRay deletes the cluster's pods.
func (c *RayCluster) Suspend() { c.Spec.Suspend = ptr.To(true) }

// Resume clears spec.suspend; KubeRay creates the pods.
func (c *RayCluster) Resume() { c.Spec.Suspend = ptr.To(false) }

// Scheduling returns each pod set's node selector, tolerations and berth's
// labels and annotations.
func (c *RayCluster) Scheduling() []jobs.PodSetScheduling {
	names, ts := c.templates()
	out := make([]jobs.PodSetScheduling, 0, len(names))
	for _, name := range names {
		out = append(out, jobs.TemplateScheduling(name, ts[name]))
	}
	return out
}

// SetScheduling sets the node selector, tolerations, labels and
// annotations of the named pod sets' templates.
func (c *RayCluster) SetScheduling(s []jobs.PodSetScheduling) {
	_, ts := c.templates()
	for _, ps := range s {
		if t, ok := ts[ps.Name]; ok {
			jobs.ApplyScheduling(t, ps)
		}
	}
}

// IsActive reports whether KubeRay may still run pods of the cluster: not
// once it reports the cluster suspended (its pods deleted), nor before it
// first reported anything (it has created none).
func (c *RayCluster) IsActive() bool {
	st := &c.Status
	// KubeRay v1.6 still sets the deprecated state to suspended once the
	// pods are gone, and only it when its status-conditions gate is off.
	state := st.State //nolint:staticcheck // read alongside the conditions that replace it
	if state == rayv1.Suspended || meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayClusterSuspended)) {
		return false
	}
	return state != "" || len(st.Conditions) > 0 || st.Head.PodName != ""
}

// Finished is never true: a RayCluster runs until it is deleted.
func (c *RayCluster) Finished() (bool, bool, string) { return false, false, "" }

// The reconciler holds and releases RayClusters; the pod webhook also reads
// a RayCluster's metadata to accept the pods KubeRay creates for it, or for
// a RayJob's cluster (pods.Validator.Owners and Parents).
// +kubebuilder:rbac:groups=ray.io,resources=rayclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ray.io,resources=rayclusters/finalizers,verbs=update
