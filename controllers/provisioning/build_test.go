package provisioning

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func bookingWorkload(topology *berthv1.TopologyAssignment) *berthv1.Workload {
	return &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-train-abcde"},
		Spec: berthv1.WorkloadSpec{PodSets: []berthv1.PodSet{
			{Name: "leader", Count: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			{Name: "workers", Count: 3, Requests: corev1.ResourceList{gpu: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")}},
		}},
		Status: berthv1.WorkloadStatus{
			Admission: &berthv1.Admission{
				ClusterQueue: "cq",
				PodSetAssignments: []berthv1.PodSetAssignment{
					{Name: "leader", Count: 1, Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "cpu-only"}},
					{Name: "workers", Count: 3, Flavors: map[corev1.ResourceName]string{gpu: "h200"}},
				},
				Topology:     topology,
				Provisioning: &berthv1.AdmissionProvisioning{ClassName: berthv1.ProvisioningClassAtomicScaleUp},
			},
			Provisioning: &berthv1.ProvisioningStatus{
				Attempt: 2, RequestName: "job-train-abcde-2", ClassName: berthv1.ProvisioningClassAtomicScaleUp,
				State: berthv1.ProvisioningPending, Topology: topology,
			},
		},
	}
}

func h200() *berthv1.ResourceFlavor {
	return &berthv1.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: "h200"},
		Spec: berthv1.ResourceFlavorSpec{
			NodeLabels:     map[string]string{"gpu.nvidia.com/model": "h200"},
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			TopologyLevels: []string{"zone", "rack"},
			Provisioning:   &berthv1.ProvisioningPolicy{Parameters: map[string]string{"noRetry": "true"}},
		},
	}
}

func TestBuildRequest(t *testing.T) {
	rack := &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack"}, Values: []string{"z1", "r2"}}
	oneNewNode := &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack", "kubernetes.io/hostname"},
		Values: []string{"z1", "r2", ""}}
	cases := []struct {
		name     string
		topology *berthv1.TopologyAssignment
		selector map[string]string
	}{
		{"pinned to a rack", rack, map[string]string{"gpu.nvidia.com/model": "h200", "zone": "z1", "rack": "r2"}},
		{"unpinned", nil, map[string]string{"gpu.nvidia.com/model": "h200"}},
		{"one new node: its rack and its pool, no hostname yet", oneNewNode,
			map[string]string{"gpu.nvidia.com/model": "h200", "zone": "z1", "rack": "r2", berthv1.CapacityPoolLabel: "big-r2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl, rf := bookingWorkload(tc.topology), h200()
			if tc.topology.AwaitsNode() {
				wl.Status.Admission.Provisioning.NewNodes = []berthv1.PoolNodes{{Pool: "big-r2", Nodes: 1}}
			}
			pr, templates := BuildRequest(wl, rf)
			if pr.Name != "job-train-abcde-2" || pr.Namespace != "team-a" {
				t.Errorf("request %s/%s", pr.Namespace, pr.Name)
			}
			if pr.Spec.ProvisioningClassName != autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp {
				t.Errorf("class %q", pr.Spec.ProvisioningClassName)
			}
			if pr.Spec.Parameters["noRetry"] != "true" || len(pr.Spec.Parameters) != 1 {
				t.Errorf("parameters %v", pr.Spec.Parameters)
			}
			wantSets := []autoscalingv1.PodSet{
				{PodTemplateRef: autoscalingv1.Reference{Name: "job-train-abcde-2-leader"}, Count: 1},
				{PodTemplateRef: autoscalingv1.Reference{Name: "job-train-abcde-2-workers"}, Count: 3},
			}
			if !equality.Semantic.DeepEqual(pr.Spec.PodSets, wantSets) {
				t.Errorf("pod sets %v, want %v", pr.Spec.PodSets, wantSets)
			}
			if len(templates) != 2 {
				t.Fatalf("%d templates", len(templates))
			}
			for i, tmpl := range templates {
				if tmpl.Name != wantSets[i].PodTemplateRef.Name {
					t.Errorf("template %d named %q", i, tmpl.Name)
				}
				spec := tmpl.Template.Spec
				if !equality.Semantic.DeepEqual(spec.NodeSelector, tc.selector) {
					t.Errorf("template %s node selector %v, want %v", tmpl.Name, spec.NodeSelector, tc.selector)
				}
				if !equality.Semantic.DeepEqual(spec.Tolerations, rf.Spec.Tolerations) {
					t.Errorf("template %s tolerations %v", tmpl.Name, spec.Tolerations)
				}
				c := spec.Containers[0]
				if c.Name != "main" || c.Image != PauseImage {
					t.Errorf("container %s %s", c.Name, c.Image)
				}
				if !equality.Semantic.DeepEqual(c.Resources.Requests, wl.Spec.PodSets[i].Requests) {
					t.Errorf("requests %v", c.Resources.Requests)
				}
			}
			workers := templates[1].Template.Spec.Containers[0].Resources.Limits
			if q := workers[gpu]; q.Cmp(resource.MustParse("8")) != 0 || len(workers) != 1 {
				t.Errorf("worker limits %v: want the GPUs only", workers)
			}
			if templates[0].Template.Spec.Containers[0].Resources.Limits != nil {
				t.Errorf("leader limits %v: want none", templates[0].Template.Spec.Containers[0].Resources.Limits)
			}
		})
	}
}

func TestTemplateName(t *testing.T) {
	if got := TemplateName("r-1", "main"); got != "r-1-main" {
		t.Errorf("TemplateName = %q", got)
	}
	long := strings.Repeat("a", 250)
	got := TemplateName(long, "workers")
	if len(got) != 253 || got == TemplateName(long, "leader") {
		t.Errorf("long name %q (%d): want 253 characters, unique per pod set", got, len(got))
	}
}

// TestBuildRequestFromTemplate: a pod set's template reaches the request as
// the job declares it, with berth's additions merged in.
func TestBuildRequestFromTemplate(t *testing.T) {
	rack := &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack"}, Values: []string{"z1", "r2"}}
	wl := bookingWorkload(rack)
	claim := "eight-gpus"
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu.product", Operator: corev1.NodeSelectorOpIn, Values: []string{"H200"}}}}}}}}
	own := corev1.Toleration{Key: "team-a", Operator: corev1.TolerationOpExists}
	wl.Spec.PodSets[1].Template = &berthv1.PodSetTemplate{
		Labels: map[string]string{"app": "train"},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"gpu.product": "H200"},
			Affinity:       affinity,
			Tolerations:    []corev1.Toleration{own, h200().Spec.Tolerations[0]},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &claim}},
			Containers:     []corev1.Container{{Name: "trainer", Image: "trainer:v1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}},
		},
	}
	_, templates := BuildRequest(wl, h200())
	got := templates[1].Template
	if c := got.Spec.Containers; len(c) != 1 || c[0].Name != "trainer" || c[0].Image != "trainer:v1" {
		t.Fatalf("containers %+v, want the job's", c)
	}
	wantSel := map[string]string{"gpu.product": "H200", "gpu.nvidia.com/model": "h200", "zone": "z1", "rack": "r2"}
	if !equality.Semantic.DeepEqual(got.Spec.NodeSelector, wantSel) {
		t.Fatalf("node selector %v, want %v", got.Spec.NodeSelector, wantSel)
	}
	if len(got.Spec.Tolerations) != 2 || !equality.Semantic.DeepEqual(got.Spec.Affinity, affinity) {
		t.Fatalf("tolerations %v (want the job's and the flavor's once), affinity %+v", got.Spec.Tolerations, got.Spec.Affinity)
	}
	if len(got.Spec.ResourceClaims) != 1 || *got.Spec.ResourceClaims[0].ResourceClaimTemplateName != claim || got.Labels["app"] != "train" {
		t.Fatalf("claims %+v, labels %v: want the job's", got.Spec.ResourceClaims, got.Labels)
	}
	if len(got.Annotations) != 0 {
		t.Fatalf("annotations %v: a request's template consumes nothing", got.Annotations)
	}
	if wl.Spec.PodSets[1].Template.Spec.NodeSelector["rack"] != "" {
		t.Fatal("building the request changed the Workload's template")
	}
	if c := templates[0].Template.Spec.Containers; len(c) != 1 || c[0].Image != PauseImage {
		t.Fatalf("a pod set without a template: containers %+v, want one pause container with its requests", c)
	}
}
