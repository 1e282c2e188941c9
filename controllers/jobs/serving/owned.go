package serving

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// ControllerIndex is the cache index of ReplicaSets and pods by the UID of
// their controller. A rollout looks at one Deployment's ReplicaSets and
// their pods; a namespace that serves two thousand Deployments holds two
// thousand ReplicaSets and their replicas, and listing the namespace on
// every replica's event made a scale-up cost berth time quadratic in it.
const ControllerIndex = "berth.dev/controller-uid"

// ControllerUIDOf is the value ControllerIndex indexes o by: its
// controller's UID, none for an object without a controller.
func ControllerUIDOf(o client.Object) []string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// IndexControllers registers ControllerIndex for ReplicaSets and pods.
func IndexControllers(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&appsv1.ReplicaSet{}, &corev1.Pod{}} {
		if err := indexer.IndexField(ctx, obj, ControllerIndex, ControllerUIDOf); err != nil {
			return fmt.Errorf("indexing %T by controller: %w", obj, err)
		}
	}
	return nil
}

// replicaSetsOf lists the ReplicaSets Deployment d controls.
func replicaSetsOf(ctx context.Context, c client.Reader, d *appsv1.Deployment) ([]appsv1.ReplicaSet, error) {
	rss := &appsv1.ReplicaSetList{}
	if err := c.List(ctx, rss, client.InNamespace(d.Namespace), client.MatchingFields{ControllerIndex: string(d.UID)}); err != nil {
		return nil, fmt.Errorf("listing the ReplicaSets of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return rss.Items, nil
}

// queuedPodsOf lists the queued pods that the ReplicaSets with the given
// UIDs control.
func queuedPodsOf(ctx context.Context, c client.Reader, namespace string, rss ...types.UID) ([]corev1.Pod, error) {
	var out []corev1.Pod
	for _, uid := range rss {
		list := &corev1.PodList{}
		err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{ControllerIndex: string(uid)},
			client.HasLabels{berthv1.QueueNameLabel})
		if err != nil {
			return nil, fmt.Errorf("listing the pods of ReplicaSet %s in %s: %w", uid, namespace, err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// uids are the UIDs of rss.
func uids(rss []appsv1.ReplicaSet) []types.UID {
	out := make([]types.UID, 0, len(rss))
	for i := range rss {
		out = append(out, rss[i].UID)
	}
	return out
}
