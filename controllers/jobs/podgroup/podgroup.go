// Package podgroup adapts groups of plain pods to berth. Pods labelled with
// berth.dev/queue-name and berth.dev/pod-group, and annotated with
// berth.dev/pod-group-total-count, are one gang per group name and
// namespace; a labelled pod without a group is a group of one. Pods are
// held by the berth.dev/admission scheduling gate (see package pods) and a
// group's Workload is created only once all of its pods exist: until then,
// and when members disagree on the count, an InvalidJob event on the pods
// says what is missing.
package podgroup

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
)

// PodSetName is the name of a pod group's only pod set.
const PodSetName = "main"

// EventGroupIncomplete is the reason of the warning event on a group that
// does not have all of its pods yet.
const EventGroupIncomplete = "GroupIncomplete"

// Kind is the jobs.Kind of pod groups.
type Kind struct{}

var (
	_ jobs.Kind     = Kind{}
	_ jobs.Resolver = Kind{}
	_ jobs.Members  = (*Group)(nil)
)

// GVK of v1 Pod.
func (Kind) GVK() schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind("Pod") }

// NewObject returns an empty Pod.
func (Kind) NewObject() client.Object { return &corev1.Pod{} }

// Wrap returns the group of one pod, as if it were alone.
func (Kind) Wrap(obj client.Object) jobs.GenericJob {
	return newGroup([]corev1.Pod{*obj.(*corev1.Pod)})
}

// Key is a managed pod's group name, or its own name when it has none.
// Pods controlled by another object (a Job, a StatefulSet) are not plain
// pods and belong to their owner's adapter.
func (Kind) Key(obj client.Object) (string, bool) {
	if _, ok := obj.GetLabels()[berthv1.QueueNameLabel]; !ok || metav1.GetControllerOf(obj) != nil {
		return "", false
	}
	if g := obj.GetLabels()[berthv1.PodGroupLabel]; g != "" {
		return g, true
	}
	return obj.GetName(), true
}

// SchedulingGroup is the PodGroup a pod of a group of two or more joins
// when berth hands gangs to kube-scheduler's gang scheduling, named from
// the group's name; "" for a pod of no group, or of a group of one.
func SchedulingGroup(_ context.Context, p *corev1.Pod) string {
	group, ok := Kind{}.Key(p)
	if !ok || group != p.Labels[berthv1.PodGroupLabel] {
		return ""
	}
	if n, err := strconv.Atoi(p.Annotations[berthv1.PodGroupTotalCountAnnotation]); err != nil || n < 2 {
		return ""
	}
	return jobs.SchedulingGroupName("podgroup", group)
}

// Resolve reads the pods of a group, or the lone pod whose key is its own
// name, from the gang-key index.
func (k Kind) Resolve(ctx context.Context, c client.Reader, namespace, key string) (jobs.Gang, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{jobs.KeyIndexKey(k.GVK()): key}); err != nil {
		return nil, fmt.Errorf("listing pods of group %s: %w", key, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return newGroup(list.Items), nil
}

// Group is a pod group seen as a GenericJob.
type Group struct {
	pods.Gang
}

func newGroup(all []corev1.Pod) *Group {
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	g := &Group{Gang: pods.Gang{Pods: all, PodSetOf: func(*corev1.Pod) string { return PodSetName }}}
	if total, err := g.total(); err == nil && int(total) < len(all) {
		g.Pods, g.Excluded = members(all, int(total))
	}
	return g
}

// members splits a group that has more pods than its count into the count
// of members and the rest, which berth never releases: a tenant who adds
// pods to an admitted group does not run more than it was admitted for.
// Pods that were released and did not fail keep their place; then gated
// pods, oldest first, so that the replacement of a failed member joins
// before a later extra; failed pods and pods going away last.
func members(all []corev1.Pod, total int) ([]corev1.Pod, []jobs.ExcludedPod) {
	rank := func(p *corev1.Pod) int {
		switch {
		case !pods.IsGated(p) && p.Status.Phase != corev1.PodFailed:
			return 0
		case pods.IsGated(p) && p.DeletionTimestamp.IsZero():
			return 1
		default:
			return 2
		}
	}
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b corev1.Pod) int {
		if ra, rb := rank(&a), rank(&b); ra != rb {
			return ra - rb
		}
		if pods.Older(&a, &b) {
			return -1
		}
		return 1
	})
	in := sorted[:total]
	sort.Slice(in, func(i, j int) bool { return in[i].Name < in[j].Name })
	var out []jobs.ExcludedPod
	for _, p := range sorted[total:] {
		if p.Status.Phase == corev1.PodFailed || !pods.IsGated(&p) {
			continue // a failed member, replaced: nothing to hold
		}
		out = append(out, jobs.ExcludedPod{Name: p.Name, UID: p.UID, Why: fmt.Sprintf(
			"group %q counts %d pods (%s) and has %d: delete the extra pods, or raise the count on every member to queue the group again at its new size",
			p.Labels[berthv1.PodGroupLabel], total, berthv1.PodGroupTotalCountAnnotation, len(all))})
	}
	return in, out
}

// QuietEvents implements jobs.Quiet: a group's routine events would land
// on one of its pods, two per group, which a burst of small groups pays
// for in API writes; its Workload's conditions say the same. Warnings
// stay.
func (*Group) QuietEvents() bool { return true }

// WorkloadSuffix is empty: a group has one Workload, named after its key.
func (g *Group) WorkloadSuffix() string { return "" }

// Object is the group's first pod, which events are recorded on.
func (g *Group) Object() client.Object { return &g.Pods[0] }

// Owners are every member: the Workload lives as long as one of them.
func (g *Group) Owners() []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(g.Pods))
	for i := range g.Pods {
		out = append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: g.Pods[i].Name, UID: g.Pods[i].UID})
	}
	return out
}

// total reads the group's count; every member must agree.
func (g *Group) total() (int32, error) {
	if _, grouped := g.Pods[0].Labels[berthv1.PodGroupLabel]; !grouped {
		return 1, nil
	}
	first, firstPod := "", ""
	for i := range g.Pods {
		v := g.Pods[i].Annotations[berthv1.PodGroupTotalCountAnnotation]
		if i == 0 {
			first, firstPod = v, g.Pods[i].Name
			continue
		}
		if v != first {
			return 0, fmt.Errorf("pods %s and %s of group %q disagree on %s (%q and %q): give every member the same count",
				firstPod, g.Pods[i].Name, g.Pods[0].Labels[berthv1.PodGroupLabel], berthv1.PodGroupTotalCountAnnotation, first, v)
		}
	}
	n, err := strconv.ParseInt(first, 10, 32)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("group %q: %s is %q: set it to the number of pods of the group (at least 1)",
			g.Pods[0].Labels[berthv1.PodGroupLabel], berthv1.PodGroupTotalCountAnnotation, first)
	}
	return int32(n), nil
}

// PodSets is one pod set of the group's count, charged for its largest
// member. A group whose pods do not all exist yet cannot be queued.
func (g *Group) PodSets() ([]berthv1.PodSet, error) {
	total, err := g.total()
	if err != nil {
		return nil, err
	}
	if n := int32(len(g.Pods)); n != total {
		return nil, jobs.Incomplete(EventGroupIncomplete, "group %q has %d of its %d pods: berth queues it once all exist (create the missing pods, or fix %s)",
			g.Pods[0].Labels[berthv1.PodGroupLabel], n, total, berthv1.PodGroupTotalCountAnnotation)
	}
	members := make([]*corev1.Pod, 0, len(g.Pods))
	for i := range g.Pods {
		members = append(members, &g.Pods[i])
	}
	return []berthv1.PodSet{{Name: PodSetName, Count: total, Requests: pods.Requests(members)}}, nil
}

// MemberSpecs is every member's spec: each member is its own pod, so the
// group is charged for its largest member's claims as for its largest
// member's containers (PodSets), not for the first pod's claims alone.
func (g *Group) MemberSpecs() map[string][]*corev1.PodSpec {
	specs := make([]*corev1.PodSpec, 0, len(g.Pods))
	for i := range g.Pods {
		specs = append(specs, &g.Pods[i].Spec)
	}
	return map[string][]*corev1.PodSpec{PodSetName: specs}
}

// PodTemplates is the first pod's spec.
func (g *Group) PodTemplates() []jobs.PodSetTemplate {
	return []jobs.PodSetTemplate{{Name: PodSetName, Labels: g.Pods[0].Labels, Spec: &g.Pods[0].Spec}}
}

// Scheduling is the first pod's own node selector and tolerations.
func (g *Group) Scheduling() []jobs.PodSetScheduling {
	return []jobs.PodSetScheduling{{Name: PodSetName, NodeSelector: g.Pods[0].Spec.NodeSelector, Tolerations: g.Pods[0].Spec.Tolerations}}
}

// Finished reports a group all of whose pods ended; it succeeded when all
// of them succeeded.
func (g *Group) Finished() (bool, bool, string) {
	total, err := g.total()
	if err != nil || int32(len(g.Pods)) < total {
		return false, false, ""
	}
	failed := 0
	for i := range g.Pods {
		switch g.Pods[i].Status.Phase {
		case corev1.PodSucceeded:
		case corev1.PodFailed:
			failed++
		default:
			return false, false, ""
		}
	}
	if failed > 0 {
		return true, false, fmt.Sprintf("%d of %d pods failed", failed, len(g.Pods))
	}
	return true, true, "all pods succeeded"
}
