package lws

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/berth-dev/berth/controllers/jobs"
)

// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch

// ownPods splits the pods that carry a LeaderWorkerSet's name label into
// those whose controllers lead to the set by UID and the rest. The
// LeaderWorkerSet controller makes one leader StatefulSet named after the
// set and controlled by it; each leader pod controls the StatefulSet of its
// workers, named after the leader pod. A label is all a tenant's own
// StatefulSet needs to pass for a replica's pods, and a controller
// reference can be written by whoever creates the object, but neither name
// can be taken while the set's own objects hold it: so berth counts a pod
// only when its StatefulSet is one of those, by UID and by name. Pods
// controlled by the set itself (as some LeaderWorkerSet versions create
// them) count too: only kube-controller-manager or an administrator can
// create a queued pod that names a controller (see pods.Validator).
func ownPods(ctx context.Context, c client.Reader, set *lwsv1.LeaderWorkerSet, all []corev1.Pod) ([]corev1.Pod, []jobs.ExcludedPod, error) {
	controller, names, err := controllingSets(ctx, c, set.Namespace, all)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the StatefulSets of LeaderWorkerSet %s: %w", set.Name, err)
	}
	// leaderSet reports the set's own leader StatefulSet.
	leaderSet := func(uid types.UID) bool {
		ref := controller[uid]
		return ref != nil && ref.Kind == "LeaderWorkerSet" && ref.UID == set.UID && names[uid] == set.Name
	}
	leaders := map[types.UID]string{}
	for i := range all {
		p := &all[i]
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "StatefulSet" && leaderSet(ref.UID) {
			leaders[p.UID] = p.Name
		}
	}
	var in []corev1.Pod
	var out []jobs.ExcludedPod
	for i := range all {
		p := &all[i]
		ref := metav1.GetControllerOf(p)
		switch {
		case ref == nil:
		case ref.Kind == "LeaderWorkerSet" && ref.UID == set.UID:
			in = append(in, *p)
			continue
		case ref.Kind == "StatefulSet" && leaderSet(ref.UID):
			in = append(in, *p)
			continue
		case ref.Kind == "StatefulSet" && workerSet(controller[ref.UID], names[ref.UID], leaders):
			in = append(in, *p)
			continue
		case !p.DeletionTimestamp.IsZero():
			// Going already: a replica scaled away loses its workers'
			// StatefulSet before its pods, and a warning for them would
			// be noise.
			continue
		}
		out = append(out, jobs.ExcludedPod{Name: p.Name, UID: p.UID, Why: fmt.Sprintf(
			"it carries LeaderWorkerSet %s's labels but its controller is not one of the set's StatefulSets: "+
				"berth releases only the pods the set itself creates", set.Name)})
	}
	return in, out, nil
}

// controllingSets reads the StatefulSets that the pods' controller
// references name, and returns each one's controller reference and name by
// UID. A reference counts only where name and UID both match, as the pod
// webhook's ownership check reads it. Reading the named sets, not the
// namespace's, keeps a set's reconcile from copying every StatefulSet of a
// namespace that serves many sets on each event of a burst.
func controllingSets(ctx context.Context, c client.Reader, namespace string, all []corev1.Pod) (map[types.UID]*metav1.OwnerReference, map[types.UID]string, error) {
	controller := map[types.UID]*metav1.OwnerReference{}
	names := map[types.UID]string{}
	read := map[string]bool{}
	for i := range all {
		ref := metav1.GetControllerOf(&all[i])
		if ref == nil || ref.Kind != "StatefulSet" || read[ref.Name] {
			continue
		}
		read[ref.Name] = true
		sts := &appsv1.StatefulSet{}
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sts)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("reading StatefulSet %s/%s: %w", namespace, ref.Name, err)
		}
		controller[sts.UID], names[sts.UID] = metav1.GetControllerOf(sts), sts.Name
	}
	return controller, names, nil
}

// workerSet reports whether a StatefulSet with controller ref and name is
// the workers' StatefulSet of one of leaders: controlled by the leader pod
// and named after it.
func workerSet(ref *metav1.OwnerReference, name string, leaders map[types.UID]string) bool {
	if ref == nil || ref.Kind != "Pod" {
		return false
	}
	leader, ok := leaders[ref.UID]
	return ok && leader == name
}
