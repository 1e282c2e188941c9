package pods

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/berth-dev/berth/controllers/jobs"
)

// isReplicaPod reports whether a pod claims to belong to a LeaderWorkerSet
// replica: it carries the set's name label and is controlled by a
// StatefulSet (or, as some LeaderWorkerSet versions and tests create them,
// by the set itself). replicaWorkload checks the claim.
func isReplicaPod(p *corev1.Pod, ref *metav1.OwnerReference) bool {
	name := p.Labels[lwsv1.SetNameLabelKey]
	return name != "" && (ref.Kind == "StatefulSet" || (ref.Kind == "LeaderWorkerSet" && ref.Name == name))
}

// replicaWorkload names the Workload of the LeaderWorkerSet replica a pod
// belongs to, once its controllers lead to the set by UID. A label and a
// controller reference are all a tenant's own StatefulSet needs to make pods
// that claim a replica; counted as the replica's, they would take places
// its own pods leave while they restart, and berth, which releases only the
// set's own pods (lws.ownPods), would then release those too.
func (v Validator) replicaWorkload(ctx context.Context, p *corev1.Pod) (string, string, error) {
	name := p.Labels[lwsv1.SetNameLabelKey]
	lws := &lwsv1.LeaderWorkerSet{}
	if err := v.Workloads.Cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, lws); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Sprintf("a pod of LeaderWorkerSet %q, which does not exist", name), nil
		}
		return "", "", fmt.Errorf("reading LeaderWorkerSet %s/%s: %w", p.Namespace, name, err)
	}
	owned, err := v.setsOwn(ctx, lws, p)
	if err != nil {
		return "", "", err
	}
	if !owned {
		return "", fmt.Sprintf("a pod that carries LeaderWorkerSet %s's labels but whose controller is not one of the set's StatefulSets: "+
			"berth counts and releases only the pods the set itself creates", name), nil
	}
	return jobs.GangWorkloadName("LeaderWorkerSet", lws, p.Labels[lwsv1.GroupIndexLabelKey]), "", nil
}

// setsOwn reports whether p is one of set's own pods: controlled by the set,
// by its leader StatefulSet (controlled by the set and named after it), or
// by a workers' StatefulSet (controlled by a leader pod of the leader
// StatefulSet and named after that pod). Names cannot be taken while the
// set's objects hold them, and UIDs not at all. The objects are read from
// the API server: only a tenant's edit of a pod reaches this check (berth's
// own releases never call out), and a cache that lags behind the operator
// would refuse it for nothing.
func (v Validator) setsOwn(ctx context.Context, set *lwsv1.LeaderWorkerSet, p *corev1.Pod) (bool, error) {
	ref := metav1.GetControllerOf(p)
	switch {
	case ref == nil:
		return false, nil
	case ref.Kind == "LeaderWorkerSet":
		return ref.UID == set.UID, nil
	}
	sts := &appsv1.StatefulSet{}
	if found, err := v.getOwner(ctx, p.Namespace, ref.Name, sts); err != nil || !found || sts.UID != ref.UID {
		return false, err
	}
	owner := metav1.GetControllerOf(sts)
	switch {
	case owner == nil:
		return false, nil
	case owner.Kind == "LeaderWorkerSet":
		return owner.UID == set.UID && sts.Name == set.Name, nil
	case owner.Kind != "Pod" || owner.Name != sts.Name:
		return false, nil
	}
	leader := &corev1.Pod{}
	if found, err := v.getOwner(ctx, p.Namespace, owner.Name, leader); err != nil || !found || leader.UID != owner.UID {
		return false, err
	}
	lref := metav1.GetControllerOf(leader)
	if lref == nil || lref.Kind != "StatefulSet" || lref.Name != set.Name {
		return false, nil
	}
	leaders := &appsv1.StatefulSet{}
	if found, err := v.getOwner(ctx, p.Namespace, set.Name, leaders); err != nil || !found || leaders.UID != lref.UID {
		return false, err
	}
	lsRef := metav1.GetControllerOf(leaders)
	return lsRef != nil && lsRef.Kind == "LeaderWorkerSet" && lsRef.UID == set.UID, nil
}

// getOwner reads a controller of a pod from the API server; found is false
// if it does not exist.
func (v Validator) getOwner(ctx context.Context, namespace, name string, obj client.Object) (bool, error) {
	if err := v.Workloads.API.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %T %s/%s: %w", obj, namespace, name, err)
	}
	return true, nil
}
