package jobs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// PodGangChanges passes the pod events a gang's reconciler acts on: every
// create and delete, and the updates that change what berth reads of a
// pod — its metadata (labels, annotations, finalizers, owners, deletion),
// its spec (gates, node, resources) or its phase (a pod that ended).
//
// Most of a pod's writes change only the rest of its status: kube-scheduler's
// PodScheduled and SchedulingGated conditions, the kubelet's container
// statuses, Ready, IPs. A burst of replicas writes each several times, and
// none of them changes a gang's admission or release, so they never reach
// the reconcilers' queues.
func PodGangChanges() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Pod)
		now, okNew := e.ObjectNew.(*corev1.Pod)
		if !okOld || !okNew {
			return true
		}
		return gangChanged(old, now)
	}}
}

// gangChanged reports whether now differs from old in more than the
// status other than the phase.
func gangChanged(old, now *corev1.Pod) bool {
	if old.Status.Phase != now.Status.Phase || old.Generation != now.Generation ||
		!old.DeletionTimestamp.Equal(now.DeletionTimestamp) {
		return true
	}
	return !equality.Semantic.DeepEqual(old.Labels, now.Labels) ||
		!equality.Semantic.DeepEqual(old.Annotations, now.Annotations) ||
		!equality.Semantic.DeepEqual(old.Finalizers, now.Finalizers) ||
		!equality.Semantic.DeepEqual(old.OwnerReferences, now.OwnerReferences) ||
		!equality.Semantic.DeepEqual(old.Spec, now.Spec)
}
