package jobs

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestSchedulingTemplate(t *testing.T) {
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	spec := &corev1.PodSpec{
		NodeSelector:    map[string]string{"gpu.product": "H200", "berth.dev/flavor": "added-by-berth"},
		Affinity:        &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}},
		Tolerations:     []corev1.Toleration{{Key: "added-by-berth", Operator: corev1.TolerationOpExists}},
		ResourceClaims:  []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-gpus")}},
		SchedulingGates: []corev1.PodSchedulingGate{{Name: "berth.dev/admission"}},
		NodeName:        "n1",
		Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		},
		InitContainers: []corev1.Container{{Name: "sidecar", Image: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		Containers: []corev1.Container{{
			Name: "main", Image: "trainer", Command: []string{"train"}, Env: []corev1.EnvVar{{Name: "TOKEN", Value: "secret"}},
			Resources:    corev1.ResourceRequirements{Requests: gpu, Limits: gpu},
			Ports:        []corev1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 9000, HostPort: 9000}},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}},
	}
	own := PodSetScheduling{Name: "main", NodeSelector: map[string]string{"gpu.product": "H200"}}
	got, err := schedulingTemplate(PodSetTemplate{Name: "main", Labels: map[string]string{"app": "x", berthv1.WorkloadLabel: "uid"}, Spec: spec}, own)
	if err != nil {
		t.Fatal(err)
	}
	want := &berthv1.PodSetTemplate{
		Labels: map[string]string{"app": "x"},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"gpu.product": "H200"},
			Affinity:       &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}},
			ResourceClaims: spec.ResourceClaims,
			Volumes:        spec.Volumes[:1],
			InitContainers: []corev1.Container{{Name: "sidecar", Image: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers: []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu},
				Ports: []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000}}}},
		},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("template\n got %+v\nwant %+v", got, want)
	}
}

func TestSchedulingTemplateTooLarge(t *testing.T) {
	var terms []corev1.NodeSelectorTerm
	for range 2000 {
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "example.com/some-long-label-key", Operator: corev1.NodeSelectorOpExists}}})
	}
	spec := &corev1.PodSpec{
		Affinity:   &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}},
		Containers: []corev1.Container{{Name: "main"}},
	}
	_, err := schedulingTemplate(PodSetTemplate{Name: "main", Spec: spec}, PodSetScheduling{})
	if !isInvalid(err) || !strings.Contains(err.Error(), "berth keeps at most 64 KiB") {
		t.Fatalf("got %v, want an invalid-job error that says the limit", err)
	}
}
