// Package lws adapts LeaderWorkerSets (sigs.k8s.io/lws) to berth. Each
// replica — a leader and size-1 workers — is one gang with its own
// Workload: pod sets "leader" (1 pod) and "workers" (size-1 pods). The
// LeaderWorkerSet's pods are held by the berth.dev/admission scheduling
// gate (berth's webhook labels both pod templates with the queue, see
// Defaulter, and gates the pods); a replica's pods are released together
// when its Workload is admitted. Scaling replicas up queues the new
// replicas; scaling down deletes the Workloads of the removed ones, which
// releases their quota.
package lws

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
)

// Pod set names of a replica.
const (
	LeaderPodSet  = "leader"
	WorkersPodSet = "workers"
)

// Kind is the jobs.Kind of LeaderWorkerSets.
type Kind struct{}

var (
	_ jobs.Kind     = Kind{}
	_ jobs.Splitter = Kind{}
	_ jobs.Watcher  = Kind{}
	_ jobs.Members  = (*Replica)(nil)
)

// GVK of leaderworkerset.x-k8s.io/v1 LeaderWorkerSet.
func (Kind) GVK() schema.GroupVersionKind { return lwsv1.GroupVersion.WithKind("LeaderWorkerSet") }

// NewObject returns an empty LeaderWorkerSet.
func (Kind) NewObject() client.Object { return &lwsv1.LeaderWorkerSet{} }

// Wrap returns replica 0 without pods; the reconciler uses Gangs.
func (Kind) Wrap(obj client.Object) jobs.GenericJob {
	return newReplica(obj.(*lwsv1.LeaderWorkerSet), 0, nil)
}

// Gangs returns one gang per replica, with the replica's pods.
func (Kind) Gangs(ctx context.Context, c client.Reader, obj client.Object) ([]jobs.Gang, error) {
	lws := obj.(*lwsv1.LeaderWorkerSet)
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(lws.Namespace), client.MatchingLabels{lwsv1.SetNameLabelKey: lws.Name}); err != nil {
		return nil, fmt.Errorf("listing pods of LeaderWorkerSet %s: %w", lws.Name, err)
	}
	own, excluded, err := ownPods(ctx, c, lws, list.Items)
	if err != nil {
		return nil, err
	}
	byReplica := map[int][]corev1.Pod{}
	for _, p := range own {
		if i, err := strconv.Atoi(p.Labels[lwsv1.GroupIndexLabelKey]); err == nil {
			byReplica[i] = append(byReplica[i], p)
		}
	}
	n := int(ptr.Deref(lws.Spec.Replicas, 1))
	out := make([]jobs.Gang, 0, n)
	for i := range n {
		r := newReplica(lws, i, byReplica[i])
		if i == 0 {
			r.Excluded = excluded // reported once, with the first replica
		}
		out = append(out, r)
	}
	return out, nil
}

// Watch requeues a LeaderWorkerSet when one of its pods changes.
func (Kind) Watch(_ context.Context, _ ctrl.Manager, b *builder.Builder) error {
	b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()[lwsv1.SetNameLabelKey]
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}), builder.WithPredicates(jobs.PodGangChanges()))
	return nil
}

// Replica is one replica of a LeaderWorkerSet seen as a GenericJob.
type Replica struct {
	pods.Gang
	lws   *lwsv1.LeaderWorkerSet
	index int
}

func newReplica(lws *lwsv1.LeaderWorkerSet, index int, members []corev1.Pod) *Replica {
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	return &Replica{lws: lws, index: index, Gang: pods.Gang{Pods: members, PodSetOf: podSetOf}}
}

// podSetOf is "leader" for worker index 0, else "workers".
func podSetOf(p *corev1.Pod) string {
	if p.Labels[lwsv1.WorkerIndexLabelKey] == "0" {
		return LeaderPodSet
	}
	return WorkersPodSet
}

// QuietEvents implements jobs.Quiet: a replica is one of many, and its
// routine events, all on the LeaderWorkerSet, would cost two writes per
// replica on every scale-up. Warnings stay.
func (*Replica) QuietEvents() bool { return true }

// WorkloadSuffix is the replica's index.
func (r *Replica) WorkloadSuffix() string { return strconv.Itoa(r.index) }

// Object is the LeaderWorkerSet.
func (r *Replica) Object() client.Object { return r.lws }

func (r *Replica) size() int32 { return ptr.Deref(r.lws.Spec.LeaderWorkerTemplate.Size, 1) }

func (r *Replica) leaderTemplate() *corev1.PodSpec {
	if t := r.lws.Spec.LeaderWorkerTemplate.LeaderTemplate; t != nil {
		return &t.Spec
	}
	return &r.lws.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec
}

// PodSets is the leader and, when size > 1, the workers, each charged for
// the largest of its template and its pods (MemberSpecs).
func (r *Replica) PodSets() ([]berthv1.PodSet, error) {
	size := r.size()
	if size < 1 {
		return nil, fmt.Errorf("leaderWorkerTemplate.size is %d: set it to at least 1", size)
	}
	members := r.MemberSpecs()
	out := []berthv1.PodSet{{Name: LeaderPodSet, Count: 1, Requests: chargeOf(members[LeaderPodSet])}}
	if size > 1 {
		out = append(out, berthv1.PodSet{Name: WorkersPodSet, Count: size - 1, Requests: chargeOf(members[WorkersPodSet])})
	}
	return out, nil
}

// chargeOf is what each pod of a pod set whose template is specs[0] and
// whose pods are specs[1:] is charged: the template's requests, raised to
// any pod's beyond what the API server added at its creation
// (jobs.MemberRequests). Workers appear after their leader is admitted,
// and a LimitRange's defaults on them must not read as a grown replica.
func chargeOf(specs []*corev1.PodSpec) corev1.ResourceList {
	out := jobs.PodRequests(specs[0])
	if out == nil {
		out = corev1.ResourceList{}
	}
	for _, s := range specs[1:] {
		for name, q := range jobs.MemberRequests(s) {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q
			}
		}
	}
	return out
}

// MemberSpecs is, per pod set, its template's spec and those of the
// replica's pods of the set that have not ended. The LeaderWorkerSet
// controller keeps the pods of an older revision (those a rolling update's
// partition holds back, or has not replaced yet) and berth releases them
// with the replica, so a template edited to ask for less must not charge
// the replica less than those pods run with, as for a StatefulSet.
func (r *Replica) MemberSpecs() map[string][]*corev1.PodSpec {
	out := map[string][]*corev1.PodSpec{LeaderPodSet: {r.leaderTemplate()}}
	if r.size() > 1 {
		out[WorkersPodSet] = []*corev1.PodSpec{&r.lws.Spec.LeaderWorkerTemplate.WorkerTemplate.Spec}
	}
	for i := range r.Pods {
		p := &r.Pods[i]
		set := podSetOf(p)
		if _, ok := out[set]; !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out[set] = append(out[set], &p.Spec)
	}
	return out
}

// PodTemplates are the leader's and the workers' templates.
func (r *Replica) PodTemplates() []jobs.PodSetTemplate {
	lt := r.lws.Spec.LeaderWorkerTemplate
	leaderLabels := lt.WorkerTemplate.Labels
	if lt.LeaderTemplate != nil {
		leaderLabels = lt.LeaderTemplate.Labels
	}
	out := []jobs.PodSetTemplate{{Name: LeaderPodSet, Labels: r.podLabels(leaderLabels), Spec: r.leaderTemplate()}}
	if r.size() > 1 {
		out = append(out, jobs.PodSetTemplate{Name: WorkersPodSet, Labels: r.podLabels(lt.WorkerTemplate.Labels), Spec: &lt.WorkerTemplate.Spec})
	}
	return out
}

// podLabels are a template's labels plus those the LeaderWorkerSet
// controller sets on every pod of the replica.
func (r *Replica) podLabels(template map[string]string) map[string]string {
	out := maps.Clone(template)
	if out == nil {
		out = map[string]string{}
	}
	out[lwsv1.SetNameLabelKey] = r.lws.Name
	out[lwsv1.GroupIndexLabelKey] = strconv.Itoa(r.index)
	return out
}

// Scheduling is the templates' own node selectors and tolerations.
func (r *Replica) Scheduling() []jobs.PodSetScheduling {
	out := make([]jobs.PodSetScheduling, 0, 2)
	for _, t := range r.PodTemplates() {
		out = append(out, jobs.PodSetScheduling{Name: t.Name, NodeSelector: maps.Clone(t.Spec.NodeSelector), Tolerations: t.Spec.Tolerations})
	}
	return out
}

// IsSuspended reports whether the replica is held: besides a gated pod, a
// replica missing pods is held, so pods created later are released too.
func (r *Replica) IsSuspended() bool {
	return r.Gang.IsSuspended() || int32(len(r.Pods)) < r.size()
}

// Finished is never true: a LeaderWorkerSet serves until it is deleted or
// scaled down.
func (r *Replica) Finished() (bool, bool, string) { return false, false, "" }

// +kubebuilder:webhook:path=/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset,mutating=true,failurePolicy=fail,sideEffects=None,groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=create;update,versions=v1,name=mleaderworkerset.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`

// Defaulter gives both pod templates of a LeaderWorkerSet submitted to a
// berth queue the queue label, so that its pods are gated at creation.
type Defaulter struct{}

// Default labels the pod templates with the LeaderWorkerSet's queue.
func (Defaulter) Default(_ context.Context, lws *lwsv1.LeaderWorkerSet) error {
	queue, ok := lws.Labels[berthv1.QueueNameLabel]
	if !ok {
		return nil
	}
	label := func(t *corev1.PodTemplateSpec) {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[berthv1.QueueNameLabel] = queue
	}
	label(&lws.Spec.LeaderWorkerTemplate.WorkerTemplate)
	if t := lws.Spec.LeaderWorkerTemplate.LeaderTemplate; t != nil {
		label(t)
	}
	return nil
}

// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=leaderworkerset.x-k8s.io,resources=leaderworkersets/finalizers,verbs=update
