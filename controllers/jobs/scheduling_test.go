package jobs

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestWorkloadName(t *testing.T) {
	job := func(name, uid string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	a := WorkloadName("Job", job("train", "uid-1"))
	if !strings.HasPrefix(a, "job-train-") || len(a) != len("job-train-")+5 {
		t.Errorf("name = %q, want job-train-<5 hex>", a)
	}
	if a != WorkloadName("Job", job("train", "uid-1")) {
		t.Error("the name is not deterministic")
	}
	if a == WorkloadName("Job", job("train", "uid-2")) {
		t.Error("a re-created job must get a new workload name")
	}
	long := WorkloadName("Job", job(strings.Repeat("x", 300), "u"))
	if len(long) > 253 {
		t.Errorf("name of %d characters exceeds 253", len(long))
	}
}

func TestMergeScheduling(t *testing.T) {
	gpuTaint := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	spot := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name       string
		dstLabels  map[string]string
		srcLabels  map[string]string
		wantLabels map[string]string
		dstTols    []corev1.Toleration
		srcTols    []corev1.Toleration
		wantTols   int
	}{
		{name: "into nothing", srcLabels: map[string]string{"a": "1"}, wantLabels: map[string]string{"a": "1"}, srcTols: []corev1.Toleration{gpuTaint}, wantTols: 1},
		{name: "flavor label wins", dstLabels: map[string]string{"a": "0", "b": "2"}, srcLabels: map[string]string{"a": "1"},
			wantLabels: map[string]string{"a": "1", "b": "2"}, dstTols: []corev1.Toleration{gpuTaint}, srcTols: []corev1.Toleration{gpuTaint, spot}, wantTols: 2},
		{name: "nothing to add", dstLabels: map[string]string{"b": "2"}, wantLabels: map[string]string{"b": "2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeLabels(tc.dstLabels, tc.srcLabels)
			if len(got) != len(tc.wantLabels) {
				t.Fatalf("labels = %v, want %v", got, tc.wantLabels)
			}
			for k, v := range tc.wantLabels {
				if got[k] != v {
					t.Errorf("label %s = %q, want %q", k, got[k], v)
				}
			}
			if tols := AddTolerations(tc.dstTols, tc.srcTols); len(tols) != tc.wantTols {
				t.Errorf("tolerations = %v, want %d without duplicates", tols, tc.wantTols)
			}
		})
	}
}

// TestOneNodeGangReleasedPinned: a gang booked on one new node is not
// released until pinned to it, and then with the node's hostname in its
// selector.
func TestOneNodeGangReleasedPinned(t *testing.T) {
	admitted := func(values ...string) *berthv1.Workload {
		return &berthv1.Workload{Status: berthv1.WorkloadStatus{Admission: &berthv1.Admission{Topology: &berthv1.TopologyAssignment{
			Flavor: "h200", Levels: []string{"rack", corev1.LabelHostname}, Values: values}}}}
	}
	if wl := admitted("r1", ""); releasable(wl) {
		t.Errorf("released before its node is named")
	}
	wl := admitted("r1", "big-r1-0")
	if !releasable(wl) {
		t.Fatalf("not released once pinned")
	}
	if sel := wl.Status.Admission.Topology.NodeSelector(); sel[corev1.LabelHostname] != "big-r1-0" || sel["rack"] != "r1" {
		t.Errorf("selector %v, want the rack and the node", sel)
	}
	if !releasable(&berthv1.Workload{Status: berthv1.WorkloadStatus{Admission: &berthv1.Admission{}}}) {
		t.Errorf("an admission without topology is held")
	}
}
