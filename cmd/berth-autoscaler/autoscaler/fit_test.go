package autoscaler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func container(reqs corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: reqs}}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container(rl("cpu", "1"))
	sidecar.RestartPolicy = &always
	limitOnly := corev1.Container{Name: "l", Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "2")}}
	cases := []struct {
		name string
		spec corev1.PodSpec
		want corev1.ResourceList
	}{
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "1", "memory", "1Gi")), container(rl("cpu", "2"))}}, rl("cpu", "3", "memory", "1Gi")},
		{"an init container above the containers wins", corev1.PodSpec{
			InitContainers: []corev1.Container{container(rl("cpu", "5"))},
			Containers:     []corev1.Container{container(rl("cpu", "1", "memory", "1Gi"))},
		}, rl("cpu", "5", "memory", "1Gi")},
		{"init containers do not add up", corev1.PodSpec{
			InitContainers: []corev1.Container{container(rl("cpu", "2")), container(rl("cpu", "2"))},
			Containers:     []corev1.Container{container(rl("cpu", "1"))},
		}, rl("cpu", "2")},
		{"sidecars run beside containers and later init containers", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar, container(rl("cpu", "3"))},
			Containers:     []corev1.Container{container(rl("cpu", "1"))},
		}, rl("cpu", "4")},
		{"overhead is added", corev1.PodSpec{Overhead: rl("cpu", "250m"), Containers: []corev1.Container{container(rl("cpu", "1"))}}, rl("cpu", "1250m")},
		{"a limit stands in for a missing request", corev1.PodSpec{Containers: []corev1.Container{limitOnly}}, rl("nvidia.com/gpu", "2")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PodRequests(&tc.spec)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for n, q := range tc.want {
				if g := got[n]; g.Cmp(q) != 0 {
					t.Errorf("%s: got %s, want %s", n, g.String(), q.String())
				}
			}
		})
	}
}

func TestAdmits(t *testing.T) {
	rackA := map[string]string{"rack": "a", "gpu": "h200"}
	expr := func(op corev1.NodeSelectorOperator, values ...string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: op, Values: values}}}},
		}}}
	}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name   string
		spec   corev1.PodSpec
		taints []corev1.Taint
		want   bool
	}{
		{"no constraints", corev1.PodSpec{}, nil, true},
		{"node selector matches", corev1.PodSpec{NodeSelector: map[string]string{"rack": "a"}}, nil, true},
		{"node selector differs", corev1.PodSpec{NodeSelector: map[string]string{"rack": "b"}}, nil, false},
		{"node selector key missing", corev1.PodSpec{NodeSelector: map[string]string{"zone": "1"}}, nil, false},
		{"In", corev1.PodSpec{Affinity: expr(corev1.NodeSelectorOpIn, "a", "b")}, nil, true},
		{"NotIn", corev1.PodSpec{Affinity: expr(corev1.NodeSelectorOpNotIn, "a")}, nil, false},
		{"Exists", corev1.PodSpec{Affinity: expr(corev1.NodeSelectorOpExists)}, nil, true},
		{"DoesNotExist", corev1.PodSpec{Affinity: expr(corev1.NodeSelectorOpDoesNotExist)}, nil, false},
		{"untolerated NoSchedule taint", corev1.PodSpec{}, []corev1.Taint{gpuTaint}, false},
		{"tolerated taint", corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}}, []corev1.Taint{gpuTaint}, true},
		{"PreferNoSchedule taint is ignored", corev1.PodSpec{}, []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}}, true},
		{"NoExecute taint", corev1.PodSpec{}, []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoExecute}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Admits(&tc.spec, "n1", rackA, tc.taints); got != tc.want {
				t.Errorf("Admits = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeUsable(t *testing.T) {
	ready := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	notReady := corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}
	cases := []struct {
		name string
		node corev1.Node
		want bool
	}{
		{"ready", corev1.Node{Status: ready}, true},
		{"not ready", corev1.Node{Status: notReady}, false},
		{"no condition yet", corev1.Node{}, false},
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: ready}, false},
		{"ready, not-ready taint not lifted yet", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}}, Status: ready}, false},
		{"ready, network unavailable", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}}}, Status: ready}, false},
		{"ready, disk pressure", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: corev1.TaintNodeDiskPressure, Effect: corev1.TaintEffectNoSchedule}}}, Status: ready}, false},
		{"ready, a taint of its own", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}}, Status: ready}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeUsable(&tc.node); got != tc.want {
				t.Errorf("NodeUsable = %v, want %v", got, tc.want)
			}
		})
	}
}
