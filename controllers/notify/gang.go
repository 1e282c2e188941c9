package notify

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// GangOf is what a Workload says of its gang: the job that owns it, its
// queues, flavor, topology domain, booking, size and GPUs per pod.
func GangOf(wl *berthv1.Workload) Gang {
	g := Gang{UID: wl.UID, JobKind: "Workload", JobName: wl.Name, Namespace: wl.Namespace, LocalQueue: wl.Spec.QueueName}
	if ref := metav1.GetControllerOf(wl); ref != nil {
		g.JobKind, g.JobName, g.JobAPIVersion, g.JobUID = ref.Kind, ref.Name, ref.APIVersion, string(ref.UID)
	}
	for _, ps := range wl.Spec.PodSets {
		g.Pods += int(ps.Count)
		for name, q := range ps.Requests {
			if isGPU(name) {
				g.GPUsPerPod = max(g.GPUsPerPod, q.Value())
			}
		}
	}
	adm := wl.Status.Admission
	if adm == nil {
		return g
	}
	g.ClusterQueue = adm.ClusterQueue
	for _, psa := range adm.PodSetAssignments {
		for name, flavor := range psa.Flavors {
			if g.Flavor == "" || isGPU(name) {
				g.Flavor = flavor
			}
		}
	}
	if t := adm.Topology; t != nil {
		var parts []string
		for i := range min(len(t.Levels), len(t.Values)) {
			parts = append(parts, t.Levels[i]+"="+t.Values[i])
		}
		g.Domain = strings.Join(parts, ",")
	}
	if p := wl.Status.Provisioning; p != nil && adm.Provisioning != nil {
		g.Booking = p.RequestName
	}
	return g
}

// isGPU reports whether a resource is a GPU: an extended resource named
// <vendor>/gpu, as NVIDIA's, AMD's and Intel's device plugins name theirs.
func isGPU(name corev1.ResourceName) bool { return strings.HasSuffix(string(name), "/gpu") }

// Policy is a notification policy as the notifier applies it.
type Policy struct {
	// Key names the policy: "<namespace>/<name>", or "<name>" for a
	// ClusterNotificationPolicy.
	Key string
	// Namespace is a NotificationPolicy's namespace ("" for a cluster one).
	Namespace string
	Settings  berthv1.NotificationSettings
	// LocalQueues (namespaced) or ClusterQueues (cluster) that select
	// gangs; empty selects all.
	LocalQueues, ClusterQueues []string
	// Namespaces selects the namespaces of a cluster policy by their labels
	// (nil: all).
	Namespaces labels.Selector
}

// Selects reports whether the policy reports failures of this kind for
// the gang, whose namespace has the labels nsLabels. A NotificationPolicy
// never sees another namespace's gangs.
func (p *Policy) Selects(g Gang, kind Kind, nsLabels labels.Set) bool {
	if len(p.Settings.Kinds) > 0 && !slices.Contains(p.Settings.Kinds, berthv1.FailureKind(kind)) {
		return false
	}
	if p.Namespace != "" {
		return g.Namespace == p.Namespace && (len(p.LocalQueues) == 0 || slices.Contains(p.LocalQueues, g.LocalQueue))
	}
	if p.Namespaces != nil && !p.Namespaces.Matches(nsLabels) {
		return false
	}
	return len(p.ClusterQueues) == 0 || slices.Contains(p.ClusterQueues, g.ClusterQueue)
}

// Default log lines of a report when a policy leaves logLines unset: a
// NotificationPolicy's reports go to the namespace's own team; a
// ClusterNotificationPolicy's leave every tenant's namespace it selects, so
// it carries no logs unless its platform team asks.
const (
	defaultLogLines        = 20
	defaultClusterLogLines = 0
)

// logLines is how many log lines the policy's reports carry.
func (p *Policy) logLines() int32 {
	switch {
	case p.Settings.LogLines != nil:
		return *p.Settings.LogLines
	case p.Namespace == "":
		return defaultClusterLogLines
	}
	return defaultLogLines
}
