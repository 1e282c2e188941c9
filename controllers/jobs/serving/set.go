package serving

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
)

// resolveSet returns the gang of a whole-set StatefulSet: its pods whose
// controller is the set by UID and whose ordinal is below spec.replicas.
// Pods of a higher ordinal are being scaled away; gated ones are held.
func resolveSet(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace, name, key string) (jobs.Gang, error) {
	all, err := listKey(ctx, c, gvk, namespace, key)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	sts := &appsv1.StatefulSet{}
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sts)
	switch {
	case apierrors.IsNotFound(err):
		return newReplica(all[0], fmt.Sprintf("its StatefulSet %q does not exist", name)), nil
	case err != nil:
		return nil, fmt.Errorf("reading StatefulSet %s/%s: %w", namespace, name, err)
	}
	if ptr.Deref(sts.Spec.Replicas, 1) == 0 {
		return nil, nil // scaled to zero: its Workload goes, its quota with its pods
	}
	if _, queued := sts.Labels[berthv1.QueueNameLabel]; !queued {
		return newReplica(all[0], fmt.Sprintf("its StatefulSet %q is not labelled %s: label the StatefulSet", name, berthv1.QueueNameLabel)), nil
	}
	return newSet(sts, all), nil
}

// Set is a StatefulSet annotated berth.dev/gang: set: one gang of
// spec.replicas pods that start together.
type Set struct {
	pods.Gang
	sts *appsv1.StatefulSet
}

var (
	_ jobs.Gang    = (*Set)(nil)
	_ jobs.Owned   = (*Set)(nil)
	_ jobs.Writer  = (*Set)(nil)
	_ jobs.Members = (*Set)(nil)
)

// newSet keeps the pods the set counts: controlled by it (by UID) and of
// an ordinal below its replicas. A gated pod beyond them is held and named.
func newSet(sts *appsv1.StatefulSet, all []corev1.Pod) *Set {
	s := &Set{sts: sts, Gang: pods.Gang{PodSetOf: podSetOf}}
	replicas := s.replicas()
	for _, p := range all {
		ref := metav1.GetControllerOf(&p)
		ord, ok := pods.Ordinal(sts.Name, p.Name)
		foreign := ref == nil || ref.UID != sts.UID || !ok
		switch {
		case foreign && !p.DeletionTimestamp.IsZero():
			// Going already (the pods of a set deleted and created again
			// under its name): a warning for them would be noise.
		case foreign:
			s.Excluded = append(s.Excluded, jobs.ExcludedPod{Name: p.Name, UID: p.UID, Why: fmt.Sprintf(
				"it carries StatefulSet %s's gang label but is not one of its pods: berth releases only the pods the set itself creates", sts.Name)})
		case ord < int(replicas):
			s.Pods = append(s.Pods, p)
		case pods.IsGated(&p) && p.DeletionTimestamp.IsZero():
			s.Excluded = append(s.Excluded, jobs.ExcludedPod{Name: p.Name, UID: p.UID, Why: fmt.Sprintf(
				"its ordinal is not below the %d replicas of StatefulSet %s", replicas, sts.Name)})
		}
	}
	sort.Slice(s.Pods, func(i, j int) bool { return s.Pods[i].Name < s.Pods[j].Name })
	return s
}

func (s *Set) replicas() int32 { return ptr.Deref(s.sts.Spec.Replicas, 1) }

// WorkloadSuffix is empty: the Workload is named after the key.
func (s *Set) WorkloadSuffix() string { return "" }

// Object is the StatefulSet: events are recorded on it, and its labels and
// annotations (queue, priority class, topology) describe the gang.
func (s *Set) Object() client.Object { return s.sts }

// Owners is the StatefulSet: the Workload lives as long as it does.
func (s *Set) Owners() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: pods.StatefulSetKind, Name: s.sts.Name, UID: s.sts.UID}}
}

// PodSets is spec.replicas pods, charged for the largest of the template
// and the pods (pods of an older revision may ask for more). A set whose
// pods do not all exist yet is not queued: podManagementPolicy Parallel
// (which the webhook requires) creates them all at once.
func (s *Set) PodSets() ([]berthv1.PodSet, error) {
	replicas := s.replicas()
	if replicas < 1 {
		return nil, fmt.Errorf("StatefulSet %s has %d replicas: nothing to queue", s.sts.Name, replicas)
	}
	if n := int32(len(s.Pods)); n < replicas {
		return nil, jobs.Incomplete(EventSetIncomplete, "StatefulSet %q has %d of its %d pods: berth queues the whole set once all exist",
			s.sts.Name, n, replicas)
	}
	members := []*corev1.Pod{{Spec: s.sts.Spec.Template.Spec}}
	for i := range s.Pods {
		members = append(members, &s.Pods[i])
	}
	return []berthv1.PodSet{{Name: PodSetName, Count: replicas, Requests: pods.Requests(members)}}, nil
}

// MemberSpecs is the template's and every pod's spec, as PodSets charges
// them: a pod of an older revision may claim more devices than the
// template does.
func (s *Set) MemberSpecs() map[string][]*corev1.PodSpec {
	specs := []*corev1.PodSpec{&s.sts.Spec.Template.Spec}
	for i := range s.Pods {
		specs = append(specs, &s.Pods[i].Spec)
	}
	return map[string][]*corev1.PodSpec{PodSetName: specs}
}

// PodTemplates is the StatefulSet's pod template.
func (s *Set) PodTemplates() []jobs.PodSetTemplate {
	t := &s.sts.Spec.Template
	return []jobs.PodSetTemplate{{Name: PodSetName, Labels: t.Labels, Spec: &t.Spec}}
}

// Scheduling is the template's own node selector and tolerations.
func (s *Set) Scheduling() []jobs.PodSetScheduling {
	t := &s.sts.Spec.Template.Spec
	return []jobs.PodSetScheduling{{Name: PodSetName, NodeSelector: t.NodeSelector, Tolerations: t.Tolerations}}
}

// IsSuspended reports whether the set is held: besides a gated pod, a set
// missing pods is held, so the pods created later are released too.
func (s *Set) IsSuspended() bool {
	return s.Gang.IsSuspended() || int32(len(s.Pods)) < s.replicas()
}

// Finished is never true: a StatefulSet serves until it is deleted or
// scaled to zero (which deletes its Workload once its pods are gone).
func (s *Set) Finished() (bool, bool, string) { return false, false, "" }
