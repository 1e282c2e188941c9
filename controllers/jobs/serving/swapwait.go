package serving

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
)

// holdForSwap keeps a gated pod of an older ReplicaSet of Deployment d
// out of the queue while a swap of d is under way (a gated pod of d's
// current ReplicaSet carries berth.dev/swap-for). The ReplicaSet
// controller replaces the replica a swap deletes at once, and the
// replacement, queued in the same second as the surge pod (Workload
// creation times have second precision), could take the quota freed for
// the surge pod; the rollout would then stop, one replica fewer, with no
// second swap allowed. Held, the replacement is queued once the surge pod
// is admitted — by which time the Deployment controller is about to scale
// the old ReplicaSet down, deleting the replacement first, as it is not
// Ready. A nil error means the pod may be queued.
func holdForSwap(ctx context.Context, c client.Reader, d *appsv1.Deployment, rs *appsv1.ReplicaSet, p *corev1.Pod) error {
	if rs == nil || !pods.IsGated(p) || !p.DeletionTimestamp.IsZero() {
		return nil
	}
	rss, err := replicaSetsOf(ctx, c, d)
	if err != nil {
		return err
	}
	current, old := splitReplicaSets(d, rss)
	if current == "" || current == rs.UID || !old[rs.UID] {
		return nil
	}
	list, err := queuedPodsOf(ctx, c, d.Namespace, current)
	if err != nil {
		return err
	}
	for i := range list {
		s := &list[i]
		ref := metav1.GetControllerOf(s)
		if ref != nil && ref.UID == current && pods.IsGated(s) && s.Annotations[berthv1.SwapAnnotation] != "" {
			return &jobs.WaitError{Delay: retry, Reason: fmt.Sprintf(
				"pod %s/%s of an older revision of Deployment %s waits: surge pod %s of the rollout takes the quota of replica %s first",
				p.Namespace, p.Name, d.Name, s.Name, s.Annotations[berthv1.SwapAnnotation])}
		}
	}
	return nil
}
