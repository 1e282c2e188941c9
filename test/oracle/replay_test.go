package oracle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

func queue(name, cohort string) Observation {
	return Observation{RV: 1, ClusterQueue: &berthv1.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.ClusterQueueSpec{Cohort: cohort, ResourceGroups: []berthv1.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{gpu},
			Flavors: []berthv1.FlavorQuotas{{Name: "h200", Resources: []berthv1.ResourceQuota{{
				Name: gpu, NominalQuota: resource.MustParse("8")}}}},
		}}},
	}}
}

// admitted is Workload wl-<uid> admitted to cq, for one pod of 8 GPUs,
// with the conditions given as "Type" (True).
func admitted(rv uint64, uid, cq string, conditions ...string) Observation {
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl-" + uid, UID: types.UID(uid)},
		Spec: berthv1.WorkloadSpec{PodSets: []berthv1.PodSet{{Name: "main", Count: 1,
			Requests: corev1.ResourceList{gpu: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("1")}}}},
		Status: berthv1.WorkloadStatus{Admission: &berthv1.Admission{ClusterQueue: cq, PodSetAssignments: []berthv1.PodSetAssignment{{
			Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{gpu: "h200"},
		}}}},
	}
	for _, c := range conditions {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
	}
	return Observation{RV: rv, Workload: wl}
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

// recordedPod is a replica of 4 GPUs released on a record of its own in
// cq; forged labels it with a UID not its own.
func recordedPod(rv uint64, name, node string, phase corev1.PodPhase, forged bool) Observation {
	const gpus = "4"
	o := pod(rv, name, "pod-"+name, node, phase, gpus)
	if forged {
		o.Pod.Labels[berthv1.WorkloadLabel] = "wl-a"
	}
	o.Pod.Labels[berthv1.QueueNameLabel] = "lq"
	enc, err := lifecycle.EncodeRecord(lifecycle.Record{Workload: "deployment-" + name,
		Spec: berthv1.WorkloadSpec{QueueName: "lq", PodSets: []berthv1.PodSet{{Name: "main", Count: 1,
			Requests: corev1.ResourceList{gpu: resource.MustParse(gpus)}}}},
		Admission: berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{
			Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{gpu: "h200"}}}}})
	if err != nil {
		panic(err)
	}
	o.Pod.Annotations = map[string]string{berthv1.AdmissionRecordAnnotation: enc}
	return o
}

func TestReplay(t *testing.T) {
	cases := []struct {
		name string
		obs  []Observation
		want []string // substrings, one per violation, in order
	}{{
		name: "two pods within quota one after the other",
		obs: []Observation{queue("cq", ""), admitted(2, "a", "cq"), pod(3, "a0", "a", "n1", corev1.PodRunning, "8"),
			pod(4, "a0", "a", "n1", corev1.PodSucceeded, "8"), admitted(5, "a", "cq", berthv1.ConditionFinished),
			admitted(6, "b", "cq"), pod(7, "b0", "b", "n1", corev1.PodRunning, "8")},
	}, {
		name: "a second workload admitted and its pod bound while the first still runs",
		obs: []Observation{queue("cq", ""), admitted(2, "a", "cq"), pod(3, "a0", "a", "n1", corev1.PodRunning, "8"),
			evicted(4, "b"), admitted(5, "b", "cq"), pod(6, "b0", "b", "n2", corev1.PodPending, "8")},
		want: []string{
			"after Workload ns/wl-b was admitted, the admitted Workloads of ClusterQueue cq used 16000m of nvidia.com/gpu in flavor h200, its limit is 8000m",
			"after pod ns/b0 was bound, the bound pods of ClusterQueue cq used 16000m of nvidia.com/gpu in flavor h200, its limit is 8000m",
		},
	}, {
		name: "observations out of order are replayed in revision order",
		obs: []Observation{pod(7, "b0", "b", "n1", corev1.PodRunning, "8"), pod(4, "a0", "a", "n1", corev1.PodSucceeded, "8"),
			admitted(5, "a", "cq", berthv1.ConditionFinished), queue("cq", ""), admitted(6, "b", "cq"),
			pod(3, "a0", "a", "n1", corev1.PodRunning, "8"), admitted(2, "a", "cq")},
	}, {
		name: "a deleting pod holds its quota until it is gone",
		obs: []Observation{queue("cq", ""), admitted(2, "a", "cq"), pod(3, "a0", "a", "n1", corev1.PodRunning, "8"),
			evicted(4, "a"), admitted(5, "b", "cq"), pod(6, "b0", "b", "n2", corev1.PodRunning, "8"),
			{RV: 7, Deleted: true, Pod: pod(7, "a0", "a", "n1", corev1.PodRunning, "8").Pod}},
		want: []string{"after pod ns/b0 was bound, the bound pods of ClusterQueue cq used 16000m"},
	}, {
		name: "an evicting workload holds its quota until its admission is cleared",
		obs: []Observation{queue("cq", ""), evicted(1, "b"), admitted(2, "a", "cq"), admitted(3, "a", "cq", berthv1.ConditionEvicted),
			admitted(4, "b", "cq"), evicted(5, "a")},
		want: []string{"after Workload ns/wl-b was admitted, the admitted Workloads of ClusterQueue cq used 16000m"},
	}, {
		name: "workloads found admitted when recording starts are a baseline, charged but not judged",
		obs: func() []Observation {
			a := admitted(1, "a", "cq")
			deleting := admitted(2, "d", "gone")
			deleting.Workload.DeletionTimestamp = &metav1.Time{}
			running := pod(2, "a0", "a", "n1", corev1.PodRunning, "8")
			stray := pod(2, "x0", "", "n2", corev1.PodRunning, "8")
			for _, o := range []*Observation{&a, &deleting, &running, &stray} {
				o.Listed = true
			}
			return []Observation{queue("cq", ""), a, deleting, running, stray, evicted(3, "b"), admitted(4, "b", "cq")}
		}(),
		want: []string{"after Workload ns/wl-b was admitted, the admitted Workloads of ClusterQueue cq used 16000m"},
	}, {
		name: "a workload admitted while being deleted",
		obs: func() []Observation {
			o := admitted(3, "d", "cq")
			o.Workload.DeletionTimestamp = &metav1.Time{}
			return []Observation{queue("cq", ""), evicted(2, "d"), o}
		}(),
		want: []string{"Workload ns/wl-d was admitted while being deleted"},
	}, {
		name: "a pod bound without an admitted workload",
		obs:  []Observation{queue("cq", ""), pod(3, "x", "", "n1", corev1.PodRunning, "1"), pod(4, "x", "", "n1", corev1.PodRunning, "1")},
		want: []string{"pod ns/x is bound to node n1 without an admitted Workload"},
	}, {
		name: "a pod bound after its workload was evicted",
		obs:  []Observation{queue("cq", ""), admitted(2, "a", "cq"), evicted(3, "a"), pod(4, "a0", "a", "n1", corev1.PodRunning, "8")},
		want: []string{"pod ns/a0 is bound to node n1 without an admitted Workload"},
	}, {
		name: "an admission replaced without eviction",
		obs:  []Observation{queue("cq", ""), queue("other", ""), admitted(2, "a", "cq"), admitted(3, "a", "other")},
		want: []string{"Workload ns/wl-a was admitted again without being evicted"},
	}, {
		name: "a running workload shrunk in place",
		obs: func() []Observation {
			// Two pods of 4 GPUs, then one.
			before, after := admitted(2, "a", "cq"), admitted(3, "a", "cq")
			for _, o := range []Observation{before, after} {
				o.Workload.Spec.PodSets[0].Requests[gpu] = resource.MustParse("4")
			}
			before.Workload.Spec.PodSets[0].Count, before.Workload.Status.Admission.PodSetAssignments[0].Count = 2, 2
			return []Observation{queue("cq", ""), before, after}
		}(),
	}, {
		name: "a running workload grown in place",
		obs: func() []Observation {
			after := admitted(3, "a", "cq")
			after.Workload.Status.Admission.PodSetAssignments[0].Count = 2
			return []Observation{queue("cq", ""), admitted(2, "a", "cq"), after}
		}(),
		want: []string{"Workload ns/wl-a was admitted again without being evicted"},
	}, {
		name: "re-admission after eviction is one cycle each",
		obs:  []Observation{queue("cq", ""), queue("other", ""), admitted(2, "a", "cq"), evicted(3, "a"), admitted(4, "a", "other")},
	}, {
		name: "a cohort lends within its pool",
		obs: []Observation{queue("a", "co"), queue("b", "co"), admitted(2, "x", "a"), admitted(3, "y", "a"),
			pod(4, "x0", "x", "n1", corev1.PodRunning, "8"), pod(5, "y0", "y", "n2", corev1.PodRunning, "8")},
	}, {
		name: "a cohort over its pool",
		obs: []Observation{queue("a", "co"), queue("b", "co"), evicted(1, "z"), admitted(2, "x", "a"), admitted(3, "y", "a"), admitted(4, "z", "b"),
			pod(5, "x0", "x", "n1", corev1.PodRunning, "8"), pod(6, "y0", "y", "n2", corev1.PodRunning, "8"), pod(7, "z0", "z", "n3", corev1.PodRunning, "8")},
		want: []string{
			"after Workload ns/wl-z was admitted, the admitted Workloads of cohort co used 24000m of nvidia.com/gpu in flavor h200, its pool is 16000m",
			"after pod ns/z0 was bound, the bound pods of cohort co used 24000m of nvidia.com/gpu in flavor h200, its pool is 16000m",
		},
	}, {
		name: "unmanaged namespaces are not checked for unadmitted pods",
		obs: []Observation{queue("cq", ""), {RV: 3, Pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x", UID: "x"}, Spec: corev1.PodSpec{NodeName: "n1"}}}},
	}, {
		name: "replicas released on their records within quota, one ending before the next",
		obs: []Observation{queue("cq", ""), recordedPod(2, "r0", "", corev1.PodPending, false), recordedPod(3, "r0", "n1", corev1.PodRunning, false),
			recordedPod(4, "r1", "n1", corev1.PodRunning, false), recordedPod(5, "r0", "n1", corev1.PodSucceeded, false),
			recordedPod(6, "r2", "n1", corev1.PodRunning, false)},
	}, {
		name: "a third replica on a record beyond quota",
		obs: []Observation{queue("cq", ""), recordedPod(2, "r0", "n1", corev1.PodRunning, false),
			recordedPod(3, "r1", "n1", corev1.PodRunning, false), recordedPod(4, "r2", "", corev1.PodPending, false)},
		want: []string{"after pod ns/r2 was released on its record, the admitted Workloads of ClusterQueue cq used 12000m of nvidia.com/gpu in flavor h200, its limit is 8000m"},
	}, {
		name: "a record on a pod labelled with another UID is not counted: the pod runs outside quota",
		obs:  []Observation{queue("cq", ""), recordedPod(2, "r0", "n1", corev1.PodRunning, true)},
		want: []string{"pod ns/r0 is bound to node n1 without an admitted Workload"},
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
