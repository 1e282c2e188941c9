package raycluster

import (
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func group(name string, replicas, lo, hi int32) rayv1.WorkerGroupSpec {
	return rayv1.WorkerGroupSpec{GroupName: name, Replicas: ptr.To(replicas), MinReplicas: ptr.To(lo), MaxReplicas: ptr.To(hi), NumOfHosts: 1,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}}}}
}

func cluster(autoscaling bool, groups ...rayv1.WorkerGroupSpec) *rayv1.RayCluster {
	return &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: "ns", Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec: rayv1.RayClusterSpec{EnableInTreeAutoscaling: ptr.To(autoscaling), WorkerGroupSpecs: groups}}
}

func podSets(t *testing.T, rc *rayv1.RayCluster) string {
	t.Helper()
	sets, err := (&RayCluster{rc}).PodSets()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ps := range sets {
		out = append(out, fmt.Sprintf("%s:%d", ps.Name, ps.Count))
	}
	return strings.Join(out, " ")
}

func TestPodSets(t *testing.T) {
	tests := []struct {
		name string
		rc   *rayv1.RayCluster
		want string
	}{
		{name: "fixed size: the replicas KubeRay runs", rc: cluster(false, group("gpu", 3, 1, 5), group("cpu", 0, 0, 4)), want: "head:1 gpu:3"},
		{name: "autoscaling: admitted at the minimum", rc: cluster(true, group("gpu", 3, 1, 5), group("cpu", 0, 0, 4)), want: "head:1 gpu:1"},
		{name: "numOfHosts multiplies", rc: func() *rayv1.RayCluster {
			g := group("tpu", 2, 2, 2)
			g.NumOfHosts = 4
			return cluster(false, g)
		}(), want: "head:1 tpu:8"},
		{name: "a suspended group runs nothing", rc: func() *rayv1.RayCluster {
			g := group("gpu", 2, 2, 2)
			g.Suspend = ptr.To(true)
			return cluster(true, g)
		}(), want: "head:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podSets(t, tt.rc); got != tt.want {
				t.Errorf("pod sets %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := (&RayCluster{cluster(false, group("head", 1, 0, 1))}).PodSets(); err == nil || !strings.Contains(err.Error(), `worker group "head": the name is taken`) {
		t.Errorf("a group named head: error %v", err)
	}
}

func TestIsActive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status rayv1.RayClusterStatus
		want   bool
	}{
		{name: "never reported: no pods yet", want: false},
		{name: "provisioned", status: rayv1.RayClusterStatus{Conditions: []metav1.Condition{
			{Type: string(rayv1.RayClusterProvisioned), Status: metav1.ConditionTrue}}}, want: true},
		{name: "a head pod", status: rayv1.RayClusterStatus{Head: rayv1.HeadInfo{PodName: "serve-head-x"}}, want: true},
		{name: "suspending", status: rayv1.RayClusterStatus{Conditions: []metav1.Condition{
			{Type: string(rayv1.RayClusterSuspending), Status: metav1.ConditionTrue}}}, want: true},
		{name: "suspended", status: rayv1.RayClusterStatus{Conditions: []metav1.Condition{
			{Type: string(rayv1.RayClusterProvisioned), Status: metav1.ConditionTrue},
			{Type: string(rayv1.RayClusterSuspended), Status: metav1.ConditionTrue}}}, want: false},
		{name: "suspended, as the deprecated state says", status: suspendedState(), want: false},
	} {
		rc := cluster(false)
		rc.Status = tc.status
		if got := (&RayCluster{rc}).IsActive(); got != tc.want {
			t.Errorf("%s: IsActive() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestGrowth: an admitted cluster may shrink but not grow; an autoscaling
// one keeps its admitted size.
func TestGrowth(t *testing.T) {
	wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "raycluster-serve-abcde"},
		Spec: berthv1.WorkloadSpec{PodSets: []berthv1.PodSet{{Name: "head", Count: 1}, {Name: "gpu", Count: 2}}}}
	for _, tc := range []struct {
		name string
		rc   *rayv1.RayCluster
		want string
	}{
		{name: "as admitted", rc: cluster(false, group("gpu", 2, 0, 4))},
		{name: "shrunk", rc: cluster(false, group("gpu", 1, 0, 4))},
		{name: "grown", rc: cluster(false, group("gpu", 3, 0, 4)), want: `admitted with 2 pods in worker group "gpu" (workload raycluster-serve-abcde), not 3`},
		{name: "a new group", rc: cluster(false, group("gpu", 2, 0, 4), group("cpu", 1, 0, 1)), want: `admitted without worker group "cpu"`},
		{name: "autoscaling at its minimum", rc: cluster(true, group("gpu", 2, 2, 4))},
		{name: "autoscaler grows it", rc: cluster(true, group("gpu", 4, 2, 4)), want: "not 4"},
		{name: "autoscaler shrinks below the minimum: KubeRay keeps the minimum", rc: cluster(true, group("gpu", 0, 2, 4))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &RayCluster{tc.rc}
			errs := growth(c, wl, "the RayCluster", c.autoscaling())
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want)):
				t.Errorf("got %v, want %q", errs, tc.want)
			}
		})
	}
}

// TestSample: the shipped sample is admitted at its minimum.
func TestSample(t *testing.T) {
	data, err := os.ReadFile("../../../config/samples/raycluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := &rayv1.RayCluster{}
	if err := yaml.UnmarshalStrict(data, rc); err != nil {
		t.Fatalf("decoding the sample: %v", err)
	}
	if got := podSets(t, rc); got != "head:1 gpu-workers:2" {
		t.Errorf("pod sets %s, want head:1 gpu-workers:2", got)
	}
}

// suspendedState is the status KubeRay reports with its status-conditions
// gate off: the deprecated state alone.
func suspendedState() rayv1.RayClusterStatus {
	return rayv1.RayClusterStatus{State: rayv1.Suspended} //nolint:staticcheck // what KubeRay still writes
}
