// Package serving adapts Deployments and StatefulSets to berth, replica by
// replica. The Deployment or StatefulSet carries berth.dev/queue-name;
// berth's webhook copies the label into its pod template (Defaulter), so
// every pod the ReplicaSet or StatefulSet controller creates is gated by
// berth.dev/admission (see package pods). Each Deployment replica, and each
// StatefulSet ordinal, is a gang of one pod with its own pod-level
// Workload, owned by the pod: scaling up queues the new pods, scaling down
// releases each removed replica's quota once its pod is gone, and berth
// never writes spec.replicas. A StatefulSet annotated berth.dev/gang: set
// is one gang of spec.replicas pods instead. docs/serving.md says why the
// Workloads are per replica and what each costs.
package serving

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
)

// PodSetName is the name of a serving gang's only pod set.
const PodSetName = "main"

// EventSetIncomplete is the reason of the warning event on a whole-set
// StatefulSet that does not have all of its pods yet.
const EventSetIncomplete = "SetIncomplete"

// DeploymentKind is the jobs.Kind of Deployment replicas: its gangs are the
// pods of the ReplicaSets of queued Deployments, one gang per pod. Its
// reconcile requests name a pod; its Workloads are named
// deployment-<pod>-<hash>.
type DeploymentKind struct{}

// StatefulSetKind is the jobs.Kind of StatefulSet replicas: one gang per
// ordinal, or one gang per StatefulSet annotated berth.dev/gang: set.
type StatefulSetKind struct{}

var (
	_ jobs.Kind     = DeploymentKind{}
	_ jobs.Resolver = DeploymentKind{}
	_ jobs.Kind     = StatefulSetKind{}
	_ jobs.Resolver = StatefulSetKind{}
)

// GVK of apps/v1 Deployment. The kind's objects are pods; the GVK names
// the kind (its controller, index and Workload names) and is what the
// cluster must serve.
func (DeploymentKind) GVK() schema.GroupVersionKind {
	return appsv1.SchemeGroupVersion.WithKind(pods.DeploymentKind)
}

// NewObject returns an empty Pod: the gangs are made of pods.
func (DeploymentKind) NewObject() client.Object { return &corev1.Pod{} }

// Wrap returns the gang of one pod, unverified; the reconciler uses Resolve.
func (DeploymentKind) Wrap(obj client.Object) jobs.GenericJob {
	return newReplica(*obj.(*corev1.Pod), "")
}

// Key is the pod's name for a queued pod controlled by a ReplicaSet.
func (DeploymentKind) Key(obj client.Object) (string, bool) {
	kind, key, ok := pods.ServingKey(obj)
	return key, ok && kind == pods.DeploymentKind
}

// Resolve reads the pod of a key and checks that its ReplicaSet belongs to
// a queued Deployment.
func (k DeploymentKind) Resolve(ctx context.Context, c client.Reader, namespace, key string) (jobs.Gang, error) {
	return resolveReplica(ctx, c, k.GVK(), namespace, key)
}

// GVK of apps/v1 StatefulSet.
func (StatefulSetKind) GVK() schema.GroupVersionKind {
	return appsv1.SchemeGroupVersion.WithKind(pods.StatefulSetKind)
}

// NewObject returns an empty Pod: the gangs are made of pods.
func (StatefulSetKind) NewObject() client.Object { return &corev1.Pod{} }

// Wrap returns the gang of one pod, unverified; the reconciler uses Resolve.
func (StatefulSetKind) Wrap(obj client.Object) jobs.GenericJob {
	return newReplica(*obj.(*corev1.Pod), "")
}

// Key is the pod's name, or <set>-set for the pods of a whole-set gang.
func (StatefulSetKind) Key(obj client.Object) (string, bool) {
	kind, key, ok := pods.ServingKey(obj)
	return key, ok && kind == pods.StatefulSetKind
}

// Resolve reads the pods of a key: one ordinal's pod, checked against its
// queued StatefulSet, or every pod of a whole-set StatefulSet.
func (k StatefulSetKind) Resolve(ctx context.Context, c client.Reader, namespace, key string) (jobs.Gang, error) {
	if name, whole := strings.CutSuffix(key, pods.WholeSetSuffix); whole {
		return resolveSet(ctx, c, k.GVK(), namespace, name, key)
	}
	return resolveReplica(ctx, c, k.GVK(), namespace, key)
}

// listKey lists the pods indexed under a kind's key.
func listKey(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace, key string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{jobs.KeyIndexKey(gvk): key}); err != nil {
		return nil, fmt.Errorf("listing pods of %s gang %s: %w", gvk.Kind, key, err)
	}
	return list.Items, nil
}

// resolveReplica returns the gang of one pod. A pod whose controllers do
// not lead to a queued Deployment or StatefulSet is a gang that cannot be
// queued (InvalidJob, and it stays gated); a controller the cache has not
// seen yet is retried.
func resolveReplica(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace, key string) (jobs.Gang, error) {
	all, err := listKey(ctx, c, gvk, namespace, key)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	p := all[0]
	s, err := pods.ServingController(ctx, &p, c)
	if err != nil {
		return nil, err
	}
	if s.Missing && p.DeletionTimestamp.IsZero() {
		return nil, fmt.Errorf("pod %s/%s: %s (retrying: the cache may not have it yet)", namespace, p.Name, s.Why)
	}
	if d, ok := s.Owner.(*appsv1.Deployment); ok {
		if err := holdForSwap(ctx, c, d, s.ReplicaSet, &p); err != nil {
			return nil, err
		}
	}
	return newReplica(p, s.Why), nil
}

// Replica is one Deployment replica or StatefulSet ordinal: a gang of one
// pod, whose Workload the pod owns.
type Replica struct {
	pods.Gang
	// why is set when the pod is not a queued replica: it is never queued.
	why string
}

var (
	_ jobs.Gang       = (*Replica)(nil)
	_ jobs.Owned      = (*Replica)(nil)
	_ jobs.Writer     = (*Replica)(nil)
	_ jobs.Quiet      = (*Replica)(nil)
	_ jobs.Recordable = (*Replica)(nil)
)

// RecordPod implements jobs.Recordable: a queued replica's pod may hold
// its own quota record.
func (r *Replica) RecordPod() (*corev1.Pod, bool) { return &r.Pods[0], r.why == "" }

// QuietEvents implements jobs.Quiet: a replica is one of many, and its
// routine events would cost a write per replica on every scale-up.
func (*Replica) QuietEvents() bool { return true }

// newReplica returns the gang of pod p; why says why p is not a queued
// replica. A replica berth already released keeps running on its
// admission whatever happens to its controllers since (its Deployment
// deleted with orphan propagation, to be adopted by a new one; the label
// taken off): its quota stays charged until the pod ends, so nothing runs
// outside quota, and evicting it would stop a serving replica that a
// Deployment about to adopt its ReplicaSet expects to keep. A gated pod
// whose chain is broken stays gated (why).
func newReplica(p corev1.Pod, why string) *Replica {
	if _, released := p.Labels[berthv1.WorkloadLabel]; why != "" && released && !pods.IsGated(&p) {
		why = ""
	}
	return &Replica{Gang: pods.Gang{Pods: []corev1.Pod{p}, PodSetOf: podSetOf}, why: why}
}

func podSetOf(*corev1.Pod) string { return PodSetName }

// WorkloadSuffix is empty: the Workload is named after the key.
func (r *Replica) WorkloadSuffix() string { return "" }

// Object is the pod: events are recorded on it.
func (r *Replica) Object() client.Object { return &r.Pods[0] }

// Owners is the pod: the Workload, and the quota it holds, go with it.
func (r *Replica) Owners() []metav1.OwnerReference {
	p := &r.Pods[0]
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}}
}

// PodSets is one pod, charged for its own requests.
func (r *Replica) PodSets() ([]berthv1.PodSet, error) {
	if r.why != "" {
		return nil, fmt.Errorf("pod %s is not queued: %s", r.Pods[0].Name, r.why)
	}
	return []berthv1.PodSet{{Name: PodSetName, Count: 1, Requests: jobs.PodRequests(&r.Pods[0].Spec)}}, nil
}

// PodTemplates is the pod's own spec: its priorityClassName gives the
// Workload's priority, as for a pod group.
func (r *Replica) PodTemplates() []jobs.PodSetTemplate {
	return []jobs.PodSetTemplate{{Name: PodSetName, Labels: r.Pods[0].Labels, Spec: &r.Pods[0].Spec}}
}

// Scheduling is the pod's own node selector and tolerations.
func (r *Replica) Scheduling() []jobs.PodSetScheduling {
	p := &r.Pods[0]
	return []jobs.PodSetScheduling{{Name: PodSetName, NodeSelector: p.Spec.NodeSelector, Tolerations: p.Spec.Tolerations}}
}

// Finished reports a pod that ended (restartPolicy Always makes it rare):
// its replica's quota is released, and its controller replaces it with a
// new pod, a new gang.
func (r *Replica) Finished() (bool, bool, string) {
	switch r.Pods[0].Status.Phase {
	case corev1.PodSucceeded:
		return true, true, "pod succeeded"
	case corev1.PodFailed:
		return true, false, "pod failed"
	}
	return false, false, ""
}
