package jobs

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

func TestSetAnnotations(t *testing.T) {
	booking := map[string]string{
		autoscalingv1.ProvisioningRequestPodAnnotationKey: "wl-1",
		autoscalingv1.ProvisioningClassPodAnnotationKey:   autoscalingv1.ProvisioningClassCheckCapacity,
	}
	cases := []struct {
		name           string
		ann, set, want map[string]string
	}{
		{"added to none", nil, booking, booking},
		{"added beside the job's own", map[string]string{"team": "a"}, booking, map[string]string{"team": "a",
			autoscalingv1.ProvisioningRequestPodAnnotationKey: "wl-1", autoscalingv1.ProvisioningClassPodAnnotationKey: autoscalingv1.ProvisioningClassCheckCapacity}},
		{"restored: removed, the job's own kept", map[string]string{"team": "a",
			autoscalingv1.ProvisioningRequestPodAnnotationKey: "wl-1", autoscalingv1.ProvisioningClassPodAnnotationKey: "c"}, nil, map[string]string{"team": "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := SetAnnotations(tc.ann, tc.set)
			if len(got) == 0 && len(tc.want) == 0 {
				return
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("SetAnnotations = %v, want %v", got, tc.want)
			}
		})
	}
	if got := ProvisioningAnnotations(map[string]string{"team": "a"}); got != nil {
		t.Errorf("ProvisioningAnnotations of none = %v", got)
	}
}
