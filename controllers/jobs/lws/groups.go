package lws

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/berth-dev/berth/controllers/jobs"
)

// SchedulingGroups names, when berth hands gangs to kube-scheduler's gang
// scheduling, the PodGroup a LeaderWorkerSet pod joins: one per replica
// (set name and group index, which its leader and workers share). r reads
// the LeaderWorkerSet, because only some can form a group: with
// startupPolicy LeaderReady, or exclusive placement, the LeaderWorkerSet
// controller creates a replica's workers only once its leader is ready or
// scheduled, and a group of the replica's size would keep the leader
// waiting for workers that wait for it. Their pods, a replica of one pod,
// and a set that cannot be read join none.
func SchedulingGroups(r client.Reader) func(context.Context, *corev1.Pod) string {
	return func(ctx context.Context, p *corev1.Pod) string {
		name, index := p.Labels[lwsv1.SetNameLabelKey], p.Labels[lwsv1.GroupIndexLabelKey]
		if name == "" || index == "" {
			return ""
		}
		if size, err := strconv.Atoi(p.Annotations[lwsv1.SizeAnnotationKey]); err != nil || size < 2 {
			return ""
		}
		set := &lwsv1.LeaderWorkerSet{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, set); err != nil {
			return ""
		}
		if _, exclusive := set.Annotations[lwsv1.ExclusiveKeyAnnotationKey]; exclusive || set.Spec.StartupPolicy == lwsv1.LeaderReadyStartupPolicy {
			return ""
		}
		return jobs.SchedulingGroupName("lws", name, index)
	}
}
