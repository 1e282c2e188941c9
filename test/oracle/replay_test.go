package oracle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

func queue(name, cohort, nominal string) Observation {
	return Observation{RV: 1, ClusterQueue: &berthv1.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.ClusterQueueSpec{Cohort: cohort, ResourceGroups: []berthv1.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{gpu},
			Flavors: []berthv1.FlavorQuotas{{Name: "h200", Resources: []berthv1.ResourceQuota{{
				Name: gpu, NominalQuota: resource.MustParse(nominal)}}}},
		}}},
	}}
}

func admitted(rv uint64, uid, cq string) Observation {
	return Observation{RV: rv, Workload: &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl-" + uid, UID: types.UID(uid)},
		Status: berthv1.WorkloadStatus{Admission: &berthv1.Admission{ClusterQueue: cq, PodSetAssignments: []berthv1.PodSetAssignment{{
			Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{gpu: "h200"},
		}}}},
	}}
}

func evicted(rv uint64, uid string) Observation {
	return Observation{RV: rv, Workload: &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl-" + uid, UID: types.UID(uid)}}}
}

func pod(rv uint64, name, wl, node string, phase corev1.PodPhase, gpus string) Observation {
	labels := map[string]string{}
	if wl != "" {
		labels[berthv1.WorkloadLabel] = wl
	}
	return Observation{RV: rv, Pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pod-" + name), Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{gpu: resource.MustParse(gpus), corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: phase},
	}}
}

func TestReplay(t *testing.T) {
	cases := []struct {
		name string
		obs  []Observation
		want []string // substrings, one per violation, in order
	}{{
		name: "two pods within quota one after the other",
		obs: []Observation{queue("cq", "", "8"), admitted(2, "a", "cq"), pod(3, "a0", "a", "n1", corev1.PodRunning, "8"),
			pod(4, "a0", "a", "n1", corev1.PodSucceeded, "8"), admitted(5, "b", "cq"), pod(6, "b0", "b", "n1", corev1.PodRunning, "8")},
	}, {
		name: "second pod bound while the first still runs",
		obs: []Observation{queue("cq", "", "8"), admitted(2, "a", "cq"), pod(3, "a0", "a", "n1", corev1.PodRunning, "8"),
			admitted(5, "b", "cq"), pod(6, "b0", "b", "n2", corev1.PodPending, "8")},
		want: []string{"ClusterQueue cq used 16000m of nvidia.com/gpu in flavor h200, its limit is 8000m"},
	}, {
		name: "observations out of order are replayed in revision order",
		obs: []Observation{pod(6, "b0", "b", "n1", corev1.PodRunning, "8"), pod(4, "a0", "a", "n1", corev1.PodSucceeded, "8"),
			queue("cq", "", "8"), admitted(5, "b", "cq"), pod(3, "a0", "a", "n1", corev1.PodRunning, "8"), admitted(2, "a", "cq")},
	}, {
		name: "a deleting pod holds its quota until it is gone",
		obs: []Observation{queue("cq", "", "8"), admitted(2, "a", "cq"), pod(3, "a0", "a", "n1", corev1.PodRunning, "8"),
			evicted(4, "a"), admitted(5, "b", "cq"), pod(6, "b0", "b", "n2", corev1.PodRunning, "8"),
			{RV: 7, Deleted: true, Pod: pod(7, "a0", "a", "n1", corev1.PodRunning, "8").Pod}},
		want: []string{"after pod ns/b0 was bound, ClusterQueue cq used 16000m"},
	}, {
		name: "a pod bound without an admitted workload",
		obs:  []Observation{queue("cq", "", "8"), pod(3, "x", "", "n1", corev1.PodRunning, "1"), pod(4, "x", "", "n1", corev1.PodRunning, "1")},
		want: []string{"pod ns/x is bound to node n1 without an admitted Workload"},
	}, {
		name: "a pod bound after its workload was evicted",
		obs:  []Observation{queue("cq", "", "8"), admitted(2, "a", "cq"), evicted(3, "a"), pod(4, "a0", "a", "n1", corev1.PodRunning, "8")},
		want: []string{"pod ns/a0 is bound to node n1 without an admitted Workload"},
	}, {
		name: "an admission replaced without eviction",
		obs:  []Observation{queue("cq", "", "8"), queue("other", "", "8"), admitted(2, "a", "cq"), admitted(3, "a", "other")},
		want: []string{"Workload ns/wl-a was admitted again without being evicted"},
	}, {
		name: "re-admission after eviction is one cycle each",
		obs:  []Observation{queue("cq", "", "8"), queue("other", "", "8"), admitted(2, "a", "cq"), evicted(3, "a"), admitted(4, "a", "other")},
	}, {
		name: "a cohort lends within its pool",
		obs: []Observation{queue("a", "co", "8"), queue("b", "co", "8"), admitted(2, "x", "a"), admitted(3, "y", "a"),
			pod(4, "x0", "x", "n1", corev1.PodRunning, "8"), pod(5, "y0", "y", "n2", corev1.PodRunning, "8")},
	}, {
		name: "a cohort over its pool",
		obs: []Observation{queue("a", "co", "8"), queue("b", "co", "8"), admitted(2, "x", "a"), admitted(3, "y", "a"), admitted(4, "z", "b"),
			pod(5, "x0", "x", "n1", corev1.PodRunning, "8"), pod(6, "y0", "y", "n2", corev1.PodRunning, "8"), pod(7, "z0", "z", "n3", corev1.PodRunning, "8")},
		want: []string{"cohort co used 24000m of nvidia.com/gpu in flavor h200, its pool is 16000m"},
	}, {
		name: "unmanaged namespaces are not checked for unadmitted pods",
		obs: []Observation{queue("cq", "", "8"), {RV: 3, Pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x", UID: "x"}, Spec: corev1.PodSpec{NodeName: "n1"}}}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Replay(tc.obs, []string{"ns"})
			if len(got) != len(tc.want) {
				t.Fatalf("got %d violations, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
