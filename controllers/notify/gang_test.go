package notify

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestGangOf(t *testing.T) {
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-train-x", UID: "wl-1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "Job", Name: "train-x", UID: "job-1", Controller: ptr.To(true)}}},
		Spec: berthv1.WorkloadSpec{QueueName: "team", PodSets: []berthv1.PodSet{{Name: "main", Count: 8, Requests: corev1.ResourceList{
			"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("32")}}}},
		Status: berthv1.WorkloadStatus{
			Admission: &berthv1.Admission{ClusterQueue: "gpu", PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 8,
				Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200", corev1.ResourceCPU: "cpu-any"}}},
				Topology:     &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack"}, Values: []string{"a", "r7"}},
				Provisioning: &berthv1.AdmissionProvisioning{}},
			Provisioning: &berthv1.ProvisioningStatus{RequestName: "job-train-x-1"},
		},
	}
	got := GangOf(wl)
	want := Gang{UID: "wl-1", JobKind: "Job", JobName: "train-x", JobAPIVersion: "batch/v1", JobUID: "job-1", Namespace: "team-a", LocalQueue: "team", ClusterQueue: "gpu",
		Flavor: "h200", Domain: "zone=a,rack=r7", Booking: "job-train-x-1", Pods: 8, GPUsPerPod: 8}
	if got != want {
		t.Errorf("GangOf = %+v\nwant      %+v", got, want)
	}
}

func TestPolicySelects(t *testing.T) {
	g := Gang{Namespace: "team-a", LocalQueue: "team", ClusterQueue: "gpu"}
	gpuTeams := labels.SelectorFromSet(labels.Set{"gpu": "yes"})
	cases := []struct {
		name string
		p    Policy
		kind Kind
		ns   labels.Set
		want bool
	}{
		{"a tenant's policy sees its namespace", Policy{Namespace: "team-a"}, Restarted, nil, true},
		{"and never another's", Policy{Namespace: "team-b"}, Restarted, nil, false},
		{"a tenant's policy for one LocalQueue", Policy{Namespace: "team-a", LocalQueues: []string{"other"}}, Restarted, nil, false},
		{"kinds filter", Policy{Namespace: "team-a", Settings: berthv1.NotificationSettings{Kinds: []berthv1.FailureKind{"OOMKilled"}}},
			Restarted, nil, false},
		{"a cluster policy for all", Policy{}, Evicted, nil, true},
		{"a cluster policy by namespace labels", Policy{Namespaces: gpuTeams}, Evicted, labels.Set{"gpu": "yes"}, true},
		{"not matching the labels", Policy{Namespaces: gpuTeams}, Evicted, labels.Set{"gpu": "no"}, false},
		{"a cluster policy by ClusterQueue", Policy{ClusterQueues: []string{"cpu"}}, Evicted, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Selects(g, tc.kind, tc.ns); got != tc.want {
				t.Errorf("Selects = %v, want %v", got, tc.want)
			}
		})
	}
}
