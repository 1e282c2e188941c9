package provisioning

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// PauseImage is the image of the one container of a PodTemplate built for
// a Workload that carries no pod template (written before berth kept
// them): its requests stand for the pods'.
const PauseImage = "registry.k8s.io/pause:3.10"

// TemplateName is the deterministic name of the PodTemplate of one pod set
// of a request: "<request>-<podSet>", shortened with a hash when too long.
func TemplateName(request, podSet string) string {
	return lifecycle.ShortName(request + "-" + podSet)
}

// BuildRequest returns the ProvisioningRequest and the PodTemplates (one per
// pod set, in the order of the Workload's pod sets) that book the capacity
// of wl's admission on flavor, named after status.provisioning.requestName.
// Owner references are left to the caller.
func BuildRequest(wl *berthv1.Workload, flavor *berthv1.ResourceFlavor) (*autoscalingv1.ProvisioningRequest, []*corev1.PodTemplate) {
	p := wl.Status.Provisioning
	selector := maps.Clone(flavor.Spec.NodeLabels)
	if t := wl.Status.Admission.Topology; t != nil {
		if selector == nil {
			selector = map[string]string{}
		}
		maps.Copy(selector, t.NodeSelector())
		if pool := lifecycle.NewNodePool(wl.Status.Admission); pool != "" {
			selector[berthv1.CapacityPoolLabel] = pool
		}
	}
	pr := &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: p.RequestName},
		Spec: autoscalingv1.ProvisioningRequestSpec{
			ProvisioningClassName: string(p.ClassName),
			Parameters:            map[string]autoscalingv1.Parameter{},
		},
	}
	if pol := flavor.Spec.Provisioning; pol != nil {
		for k, v := range pol.Parameters {
			pr.Spec.Parameters[k] = autoscalingv1.Parameter(v)
		}
	}
	templates := make([]*corev1.PodTemplate, 0, len(wl.Spec.PodSets))
	for _, ps := range wl.Spec.PodSets {
		t := &corev1.PodTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: TemplateName(p.RequestName, ps.Name)},
			Template:   podTemplate(ps, selector, flavor.Spec.Tolerations),
		}
		templates = append(templates, t)
		pr.Spec.PodSets = append(pr.Spec.PodSets, autoscalingv1.PodSet{
			PodTemplateRef: autoscalingv1.Reference{Name: t.Name},
			Count:          ps.Count,
		})
	}
	return pr, templates
}

// podTemplate is what the autoscaler simulates for one pod set: the pods
// as the job declares them (their template in the Workload) with what berth
// adds when it starts them — the flavor's labels and tolerations and the
// domain pin, in selector — so that it adds a node only where the real pods
// can run. The consume-provisioning-request annotations are not on it: the
// template is the request, not a pod that consumes it.
func podTemplate(ps berthv1.PodSet, selector map[string]string, tolerations []corev1.Toleration) corev1.PodTemplateSpec {
	if ps.Template == nil {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: maps.Clone(selector),
			Tolerations:  append([]corev1.Toleration(nil), tolerations...),
			Containers:   []corev1.Container{{Name: "main", Image: PauseImage, Resources: resources(ps.Requests)}},
		}}
	}
	out := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(ps.Template.Labels)},
		Spec:       *ps.Template.Spec.DeepCopy(),
	}
	if len(selector) > 0 {
		if out.Spec.NodeSelector == nil {
			out.Spec.NodeSelector = map[string]string{}
		}
		maps.Copy(out.Spec.NodeSelector, selector)
	}
	out.Spec.Tolerations = jobs.AddTolerations(out.Spec.Tolerations, tolerations)
	return out
}

// resources are the container resources of a pod set's requests: extended
// resources and huge pages must have limits equal to their requests.
func resources(requests corev1.ResourceList) corev1.ResourceRequirements {
	out := corev1.ResourceRequirements{Requests: requests.DeepCopy()}
	for name, q := range requests {
		if needsLimit(name) {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[name] = q.DeepCopy()
		}
	}
	return out
}

func needsLimit(name corev1.ResourceName) bool {
	n := string(name)
	if strings.HasPrefix(n, corev1.ResourceHugePagesPrefix) {
		return true
	}
	return strings.Contains(n, "/") && !strings.HasPrefix(n, "kubernetes.io/") && !strings.HasPrefix(n, corev1.ResourceDefaultNamespacePrefix)
}
