package provisioning

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// PauseImage is the image of the PodTemplates' one container: the
// autoscaler reads only requests, node selector and tolerations.
const PauseImage = "registry.k8s.io/pause:3.10"

// maxNameLength is the longest object name (a DNS subdomain).
const maxNameLength = 253

// FlavorOf returns the name of the flavor whose capacity an admission books:
// the topology flavor when the gang was pinned, else the first flavor (by
// name) assigned to the pod sets for which has reports true. It returns ""
// when there is none.
func FlavorOf(a *berthv1.Admission, has func(flavor string) bool) string {
	if a == nil {
		return ""
	}
	if a.Topology != nil && a.Topology.Flavor != "" {
		return a.Topology.Flavor
	}
	var names []string
	for _, psa := range a.PodSetAssignments {
		for _, f := range psa.Flavors {
			names = append(names, f)
		}
	}
	sort.Strings(names)
	for _, f := range names {
		if has(f) {
			return f
		}
	}
	return ""
}

// TemplateName is the deterministic name of the PodTemplate of one pod set
// of a request: "<request>-<podSet>", shortened with a hash when too long.
func TemplateName(request, podSet string) string {
	name := request + "-" + podSet
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:maxNameLength-11] + "-" + hex.EncodeToString(sum[:])[:10]
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
	}
	pr := &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: p.RequestName},
		Spec: autoscalingv1.ProvisioningRequestSpec{
			ProvisioningClassName: p.ClassName,
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
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector: maps.Clone(selector),
				Tolerations:  append([]corev1.Toleration(nil), flavor.Spec.Tolerations...),
				Containers: []corev1.Container{{
					Name:      "main",
					Image:     PauseImage,
					Resources: resources(ps.Requests),
				}},
			}},
		}
		templates = append(templates, t)
		pr.Spec.PodSets = append(pr.Spec.PodSets, autoscalingv1.PodSet{
			PodTemplateRef: autoscalingv1.Reference{Name: t.Name},
			Count:          ps.Count,
		})
	}
	return pr, templates
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

// Backoff is the wait before the attempt after attempt: backoffSeconds
// doubled for each attempt after the first, capped at a day.
func Backoff(pol *berthv1.ProvisioningPolicy, attempt int32) time.Duration {
	base := time.Duration(10) * time.Second
	if pol != nil && pol.BackoffSeconds > 0 {
		base = time.Duration(pol.BackoffSeconds) * time.Second
	}
	const limit = 24 * time.Hour
	d := base
	for i := int32(1); i < attempt; i++ {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return d
}

// MaxAttempts is the policy's maxAttempts, 3 when unset.
func MaxAttempts(pol *berthv1.ProvisioningPolicy) int32 {
	if pol == nil || pol.MaxAttempts <= 0 {
		return 3
	}
	return pol.MaxAttempts
}

// DomainString names a topology domain for messages: "rack=r1" or
// "zone=z1,rack=r1"; "any domain" when unpinned.
func DomainString(t *berthv1.TopologyAssignment) string {
	if t == nil || len(t.Levels) == 0 {
		return "any domain"
	}
	parts := make([]string, 0, len(t.Levels))
	for i, l := range t.Levels {
		if i < len(t.Values) {
			parts = append(parts, l+"="+t.Values[i])
		}
	}
	return strings.Join(parts, ",")
}

// addDomain appends t to domains unless it is nil or already there; the
// oldest entries go when the list is full (the API allows 16).
func addDomain(domains []berthv1.TopologyAssignment, t *berthv1.TopologyAssignment) []berthv1.TopologyAssignment {
	if t == nil {
		return domains
	}
	for _, d := range domains {
		if d.Flavor == t.Flavor && fmt.Sprint(d.Levels) == fmt.Sprint(t.Levels) && fmt.Sprint(d.Values) == fmt.Sprint(t.Values) {
			return domains
		}
	}
	domains = append(domains, *t.DeepCopy())
	if len(domains) > 16 {
		domains = domains[len(domains)-16:]
	}
	return domains
}
