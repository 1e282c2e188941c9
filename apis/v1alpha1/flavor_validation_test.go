package v1alpha1

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestResourceFlavorValidate(t *testing.T) {
	tests := []struct {
		name string
		spec ResourceFlavorSpec
		want string // "" when valid
	}{
		{name: "valid", spec: ResourceFlavorSpec{
			NodeLabels:     map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"},
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			TopologyLevels: []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"},
		}},
		{name: "tolerate everything", spec: ResourceFlavorSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}},
		{name: "label key with a space", spec: ResourceFlavorSpec{NodeLabels: map[string]string{"gpu product": "h200"}},
			want: "spec.nodeLabels[gpu product]: Invalid value: \"gpu product\": key: name part must consist of alphanumeric characters"},
		{name: "label value too long", spec: ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": strings.Repeat("a", 64)}},
			want: "value: must be no more than 63 bytes"},
		{name: "toleration key", spec: ResourceFlavorSpec{Tolerations: []corev1.Toleration{{Key: "-bad", Operator: corev1.TolerationOpExists}}},
			want: "spec.tolerations[0].key"},
		{name: "toleration value with Exists", spec: ResourceFlavorSpec{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}},
			want: "spec.tolerations[0].value: Invalid value: \"v\": must be empty when operator is Exists"},
		{name: "toleration value syntax", spec: ResourceFlavorSpec{Tolerations: []corev1.Toleration{{Key: "k", Value: "a b"}}},
			want: "spec.tolerations[0].value"},
		{name: "toleration operator", spec: ResourceFlavorSpec{Tolerations: []corev1.Toleration{{Key: "k", Operator: "In"}}},
			want: "spec.tolerations[0].operator: Unsupported value: \"In\""},
		{name: "toleration effect", spec: ResourceFlavorSpec{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: "NoRun"}}},
			want: "spec.tolerations[0].effect: Unsupported value: \"NoRun\""},
		{name: "tolerationSeconds without NoExecute", spec: ResourceFlavorSpec{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](5)}}},
			want: "may be set only with effect NoExecute"},
		{name: "topology level", spec: ResourceFlavorSpec{TopologyLevels: []string{"rack id"}},
			want: "spec.topologyLevels[0]: Invalid value: \"rack id\": must be a node label key"},
		{name: "single-pod jobs left to the autoscaler when provisioning IfNeeded",
			spec: ResourceFlavorSpec{Provisioning: &ProvisioningPolicy{Mode: ProvisioningIfNeeded, SinglePodJobs: SinglePodJobsAutoscaler}}},
		{name: "single-pod jobs booked when provisioning Always",
			spec: ResourceFlavorSpec{Provisioning: &ProvisioningPolicy{Mode: ProvisioningAlways, SinglePodJobs: SinglePodJobsBook}}},
		{name: "single-pod jobs left to the autoscaler when provisioning Always",
			spec: ResourceFlavorSpec{Provisioning: &ProvisioningPolicy{Mode: ProvisioningAlways, SinglePodJobs: SinglePodJobsAutoscaler}},
			want: "spec.provisioning.singlePodJobs: Invalid value: \"Autoscaler\": contradicts mode: Always, which books capacity for every admission: set mode: IfNeeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rf := &ResourceFlavor{Spec: tt.spec}
			errs := rf.Validate()
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tt.want) {
				t.Fatalf("got %v, want %q", got, tt.want)
			}
		})
	}
}
