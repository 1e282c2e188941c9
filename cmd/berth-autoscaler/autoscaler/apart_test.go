package autoscaler

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// spreadPods are n pods labelled app=x whose anti-affinity on topologyKey
// selects app=x.
func spreadPods(n int, topologyKey string) []Pod {
	pods := gpuPods(0, n, "2", nil)
	spec := &corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: topologyKey, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		}},
	}}}
	for i := range pods {
		pods[i].Spec, pods[i].Labels = spec, map[string]string{"app": "x"}
	}
	return pods
}

func TestPlaceKeepsAntiAffinePodsApart(t *testing.T) {
	cases := []struct {
		name     string
		pods     []Pod
		bins     []*Bin
		pools    []*Pool
		assigned []string
		newNodes []NewNode
	}{
		{
			name:     "one pod per existing node",
			pods:     spreadPods(2, corev1.LabelHostname),
			bins:     []*Bin{bin("n1", "8", nil), bin("n2", "8", nil)},
			assigned: []string{"n1", "n2"},
		},
		{
			name:     "a new node per pod, though one would hold them all",
			pods:     spreadPods(3, corev1.LabelHostname),
			pools:    []*Pool{pool("p", nil, "p-1", "p-2", "p-3")},
			assigned: []string{"p-1", "p-2", "p-3"},
			newNodes: []NewNode{{Name: "p-1", Pool: "p"}, {Name: "p-2", Pool: "p"}, {Name: "p-3", Pool: "p"}},
		},
		{
			name:     "a pool with too few nodes left cannot take them",
			pods:     spreadPods(2, corev1.LabelHostname),
			pools:    []*Pool{pool("p", nil, "p-1")},
			assigned: []string{"", ""},
		},
		{
			name:     "a coarser key is not simulated: pods pack",
			pods:     spreadPods(2, corev1.LabelTopologyZone),
			bins:     []*Bin{bin("n1", "8", nil)},
			assigned: []string{"n1", "n1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Place(tc.pods, tc.bins, tc.pools)
			if !reflect.DeepEqual(plan.Assigned, tc.assigned) || !reflect.DeepEqual(plan.NewNodes, tc.newNodes) {
				t.Fatalf("assigned %v, new nodes %v; want %v, %v", plan.Assigned, plan.NewNodes, tc.assigned, tc.newNodes)
			}
		})
	}
}
