package persist

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// PodsRunning counts the pods that run on a Workload's quota and have not
// ended, terminating ones included: berth labels every pod it starts with
// the Workload's UID. They are read with r, an uncached reader (berth
// caches only queued pods), which happens only while a Workload waits for
// its pods to go.
func PodsRunning(ctx context.Context, r client.Reader, wl *berthv1.Workload) (int, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(wl.Namespace), client.MatchingLabels{berthv1.WorkloadLabel: string(wl.UID)}); err != nil {
		return 0, fmt.Errorf("listing the pods of workload %s/%s: %w", wl.Namespace, wl.Name, err)
	}
	n := 0
	for i := range pods.Items {
		if p := pods.Items[i].Status.Phase; p != corev1.PodSucceeded && p != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}
