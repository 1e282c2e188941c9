package jobs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestCompareSize(t *testing.T) {
	ps := func(name string, count int32, gpus string) berthv1.PodSet {
		return berthv1.PodSet{Name: name, Count: count, Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus), corev1.ResourceCPU: resource.MustParse("4")}}
	}
	admitted := []berthv1.PodSet{ps("leader", 1, "4"), ps("workers", 3, "4")}
	withMemory := ps("workers", 3, "4")
	withMemory.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
	cases := []struct {
		name   string
		now    []berthv1.PodSet
		grew   string
		shrank bool
	}{
		{"unchanged", admitted, "", false},
		{"more pods", []berthv1.PodSet{ps("leader", 1, "4"), ps("workers", 4, "4")}, "pod set workers: 4 pods, admitted for 3", false},
		{"larger pods (a rolling update to more GPUs)", []berthv1.PodSet{ps("leader", 1, "4"), ps("workers", 3, "8")}, "pod set workers: 8 nvidia.com/gpu per pod, admitted for 4", false},
		{"a new resource", []berthv1.PodSet{ps("leader", 1, "4"), withMemory}, "pod set workers: 1Gi memory per pod, admitted for 0", false},
		{"fewer pods", []berthv1.PodSet{ps("leader", 1, "4"), ps("workers", 2, "4")}, "", true},
		{"smaller pods keep running on the larger admission", []berthv1.PodSet{ps("leader", 1, "2"), ps("workers", 3, "4")}, "", false},
		{"renamed", []berthv1.PodSet{ps("head", 1, "4"), ps("workers", 3, "4")}, `pod set "leader" is now "head"`, false},
	}
	for _, tc := range cases {
		grew, shrank := compareSize(admitted, tc.now)
		if grew != tc.grew || shrank != tc.shrank {
			t.Errorf("%s: grew %q shrank %v, want %q %v", tc.name, grew, shrank, tc.grew, tc.shrank)
		}
	}
}

// TestWithoutAddedIgnoresBindingLabels: a replica pod bound to a node of a
// zone gains the zone and region labels (PodTopologyLabels); its template
// is still the one admitted, while a label of its own that changed is a
// change.
func TestWithoutAddedIgnoresBindingLabels(t *testing.T) {
	admitted := &berthv1.PodSetTemplate{Labels: map[string]string{"app": "chat"}}
	bound := admitted.DeepCopy()
	bound.Labels[corev1.LabelTopologyZone] = "zone-a"
	bound.Labels[corev1.LabelTopologyRegion] = "region-1"
	if !equality.Semantic.DeepEqual(withoutAdded(admitted, PodSetScheduling{}), withoutAdded(bound, PodSetScheduling{})) {
		t.Error("a pod that gained its node's zone and region labels counts as changed")
	}
	relabelled := admitted.DeepCopy()
	relabelled.Labels["app"] = "other"
	if equality.Semantic.DeepEqual(withoutAdded(admitted, PodSetScheduling{}), withoutAdded(relabelled, PodSetScheduling{})) {
		t.Error("a pod whose own label changed counts as unchanged")
	}
}
