package headroom

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// headroomDomains are the topology domains (values of level; "" without a
// level) where a ClusterQueue's headroom can be kept: those of its
// headroom nodes and of the CapacityPools whose nodes will be, labelled
// berth.dev/headroom=<queue>. The platform team labels and taints them;
// a policy can only keep headroom in its own ClusterQueue's.
func headroomDomains(ctx context.Context, c client.Reader, clusterQueue, level string) ([]string, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{berthv1.HeadroomLabel: clusterQueue}); err != nil {
		return nil, fmt.Errorf("listing headroom nodes: %w", err)
	}
	var pools berthv1.CapacityPoolList
	if err := c.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing CapacityPools: %w", err)
	}
	var domains []string
	add := func(labels map[string]string) {
		if labels[berthv1.HeadroomLabel] != clusterQueue {
			return
		}
		d, ok := labels[level]
		if level == "" {
			d, ok = "", true
		}
		if ok && !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	for i := range nodes.Items {
		add(nodes.Items[i].Labels)
	}
	for i := range pools.Items {
		add(pools.Items[i].Spec.NodeTemplate.Labels)
	}
	slices.Sort(domains)
	return domains, nil
}

// tolerates says whether spec tolerates the headroom taint of
// clusterQueue.
func tolerates(spec *corev1.PodSpec, clusterQueue string) bool {
	taint := headroomTaint(clusterQueue)
	for i := range spec.Tolerations {
		if spec.Tolerations[i].ToleratesTaint(klog.Background(), &taint, false) {
			return true
		}
	}
	return false
}

// headroomTaint is the taint of clusterQueue's headroom nodes.
func headroomTaint(clusterQueue string) corev1.Taint {
	return corev1.Taint{Key: berthv1.HeadroomLabel, Value: clusterQueue, Effect: corev1.TaintEffectNoSchedule}
}

// metaTime is t as the API stores it.
func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }
