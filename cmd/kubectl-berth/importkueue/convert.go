package importkueue

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Unmapped is one setting of a Kueue object that the berth objects do not
// carry, and why.
type Unmapped struct {
	Kind, Name string
	// Field is the Kueue field ("" for the whole object).
	Field  string
	Reason string
}

// Result is the berth objects an import makes, in the order to apply them
// (flavors before the queues that name them), and what was not mapped.
type Result struct {
	Objects  []client.Object
	Unmapped []Unmapped
}

// converter holds one conversion's lookups and findings.
type converter struct {
	in       *Input
	out      Result
	policies map[string]flavorPolicy // by flavor: the provisioning it gets
}

// flavorPolicy is the provisioning policy a flavor gets from the
// ProvisioningRequestConfig of a ClusterQueue's check.
type flavorPolicy struct {
	policy *berthv1.ProvisioningPolicy
	from   string // "<ClusterQueue>/<AdmissionCheck>"
}

// Convert maps the Kueue objects to berth's.
func Convert(in *Input) Result {
	c := &converter{in: in, policies: map[string]flavorPolicy{}}
	for i := range in.ClusterQueues {
		c.provisioning(&in.ClusterQueues[i])
	}
	for i := range in.Flavors {
		c.flavor(&in.Flavors[i])
	}
	for i := range in.ClusterQueues {
		c.clusterQueue(&in.ClusterQueues[i])
	}
	for i := range in.LocalQueues {
		c.localQueue(&in.LocalQueues[i])
	}
	for i := range in.PriorityClasses {
		c.priorityClass(&in.PriorityClasses[i])
	}
	for _, co := range in.Cohorts {
		c.unmapped("Cohort", co.Name, "", "berth cohorts are flat: a ClusterQueue's spec.cohort names one; a Cohort object "+
			"(hierarchy, its own quota and fair-sharing weight) has no counterpart")
	}
	for _, ac := range in.AdmissionChecks {
		if ac.Spec.ControllerName != kueue.ProvisioningRequestControllerName {
			c.unmapped("AdmissionCheck", ac.Name, "spec.controllerName",
				fmt.Sprintf("berth runs no admission checks but its own capacity bookings; %q is not mapped", ac.Spec.ControllerName))
		}
	}
	return c.out
}

func (c *converter) unmapped(kind, name, field, reason string) {
	c.out.Unmapped = append(c.out.Unmapped, Unmapped{Kind: kind, Name: name, Field: field, Reason: reason})
}

func (c *converter) flavor(rf *kueue.ResourceFlavor) {
	out := &berthv1.ResourceFlavor{
		TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "ResourceFlavor"},
		ObjectMeta: objectMeta(rf.ObjectMeta, false),
		Spec:       berthv1.ResourceFlavorSpec{NodeLabels: rf.Spec.NodeLabels, Tolerations: rf.Spec.Tolerations},
	}
	if len(rf.Spec.NodeTaints) > 0 {
		c.unmapped("ResourceFlavor", rf.Name, "spec.nodeTaints",
			"berth does not match jobs' tolerations against a flavor's taints: give the pods the tolerations they need, "+
				"or set spec.tolerations so berth adds them to admitted pods")
	}
	if t := rf.Spec.TopologyName; t != nil {
		if levels, ok := c.topology(string(*t)); ok {
			out.Spec.TopologyLevels = levels
		} else {
			c.unmapped("ResourceFlavor", rf.Name, "spec.topologyName",
				fmt.Sprintf("Topology %q is not in the input: add it, or set spec.topologyLevels to its node labels", *t))
		}
	}
	if p, ok := c.policies[rf.Name]; ok {
		out.Spec.Provisioning = p.policy
	}
	c.out.Objects = append(c.out.Objects, out)
}

// topology returns the node labels of the named Topology's levels.
func (c *converter) topology(name string) ([]string, bool) {
	for _, t := range c.in.Topologies {
		if t.Name == name {
			var levels []string
			for _, l := range t.Spec.Levels {
				levels = append(levels, l.NodeLabel)
			}
			return levels, true
		}
	}
	return nil, false
}

func (c *converter) clusterQueue(cq *kueue.ClusterQueue) {
	s := cq.Spec
	out := &berthv1.ClusterQueue{
		TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "ClusterQueue"},
		ObjectMeta: objectMeta(cq.ObjectMeta, false),
		Spec: berthv1.ClusterQueueSpec{
			Cohort: string(s.CohortName), NamespaceSelector: s.NamespaceSelector,
			QueueingStrategy: berthv1.QueueingStrategy(s.QueueingStrategy),
		},
	}
	if s.NamespaceSelector == nil {
		// Unset selects no namespace in Kueue and in berth alike; the
		// import says so explicitly, so that the output shows the queue
		// serves nobody until its administrator names namespaces.
		out.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	}
	for _, rg := range s.ResourceGroups {
		g := berthv1.ResourceGroup{CoveredResources: rg.CoveredResources}
		for _, f := range rg.Flavors {
			fq := berthv1.FlavorQuotas{Name: string(f.Name)}
			for _, r := range f.Resources {
				fq.Resources = append(fq.Resources, berthv1.ResourceQuota{Name: r.Name, NominalQuota: r.NominalQuota,
					BorrowingLimit: r.BorrowingLimit, LendingLimit: r.LendingLimit})
			}
			g.Flavors = append(g.Flavors, fq)
		}
		out.Spec.ResourceGroups = append(out.Spec.ResourceGroups, g)
	}
	c.preemption(cq, out)
	if fs := s.FairSharing; fs != nil && fs.Weight != nil {
		out.Spec.FairSharing.Weight = fs.Weight
	}
	if sp := s.StopPolicy; sp != nil {
		out.Spec.StopPolicy = berthv1.StopPolicy(*sp)
	}
	if s.FlavorFungibility != nil {
		c.unmapped("ClusterQueue", cq.Name, "spec.flavorFungibility",
			"berth takes, in the queue's order, the first flavor the gang fits without borrowing, else the first it fits by borrowing, "+
				"and preempts only when none fits; this is not configurable")
	}
	if s.AdmissionScope != nil {
		c.unmapped("ClusterQueue", cq.Name, "spec.admissionScope", "berth has no admission scopes")
	}
	c.out.Objects = append(c.out.Objects, out)
}

// preemption maps the preemption policies berth has.
func (c *converter) preemption(cq *kueue.ClusterQueue, out *berthv1.ClusterQueue) {
	p := cq.Spec.Preemption
	if p == nil {
		return
	}
	out.Spec.Preemption.WithinClusterQueue = berthv1.PreemptionMode(p.WithinClusterQueue)
	out.Spec.Preemption.ReclaimWithinCohort = berthv1.PreemptionMode(p.ReclaimWithinCohort)
	if b := p.BorrowWithinCohort; b != nil && b.Policy != kueue.BorrowWithinCohortPolicyNever {
		c.unmapped("ClusterQueue", cq.Name, "spec.preemption.borrowWithinCohort",
			"berth does not preempt in the cohort in order to borrow: a queue borrows what is free (with fair sharing, shares decide)")
	}
}

func (c *converter) localQueue(lq *kueue.LocalQueue) {
	out := &berthv1.LocalQueue{
		TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "LocalQueue"},
		ObjectMeta: objectMeta(lq.ObjectMeta, true),
		Spec:       berthv1.LocalQueueSpec{ClusterQueue: string(lq.Spec.ClusterQueue)},
	}
	if fs := lq.Spec.FairSharing; fs != nil && fs.Weight != nil {
		out.Spec.FairSharing = &berthv1.LocalQueueFairSharing{Weight: fs.Weight}
	}
	if sp := lq.Spec.StopPolicy; sp != nil {
		// Kueue's and berth's policies have the same names and meaning.
		out.Spec.StopPolicy = berthv1.StopPolicy(*sp)
	}
	c.out.Objects = append(c.out.Objects, out)
}

// priorityClass maps a WorkloadPriorityClass to a PriorityClass of the
// same name and value: berth orders a job by the PriorityClass its
// berth.dev/priority-class label names (or its pods' priorityClassName).
func (c *converter) priorityClass(wpc *kueue.WorkloadPriorityClass) {
	out := &schedulingv1.PriorityClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedulingv1.SchemeGroupVersion.String(), Kind: "PriorityClass"},
		ObjectMeta: objectMeta(wpc.ObjectMeta, false),
		Value:      wpc.Value, Description: wpc.Description,
		// It orders queued jobs; it must not let pods preempt pods at
		// the scheduler (a WorkloadPriorityClass never did).
		PreemptionPolicy: ptr.To(corev1.PreemptNever),
	}
	why := fmt.Sprintf("made a PriorityClass %q (preemptionPolicy Never): label jobs berth.dev/priority-class=%s instead of kueue.x-k8s.io/priority-class",
		wpc.Name, wpc.Name)
	if wpc.Value > 0 {
		// Kueue lets every namespace take every class; berth only the
		// namespaces whose LocalQueue the platform team lets.
		why += fmt.Sprintf("; list %q in the spec.priorityClasses of each LocalQueue whose jobs may take it", wpc.Name)
	}
	c.unmapped("WorkloadPriorityClass", wpc.Name, "", why)
	c.out.Objects = append(c.out.Objects, out)
}

// objectMeta keeps name, namespace (for namespaced kinds), labels and
// annotations other than kubectl's and Kueue's own.
func objectMeta(m metav1.ObjectMeta, namespaced bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Labels: m.Labels}
	if namespaced {
		out.Namespace = m.Namespace
	}
	if len(m.Annotations) > 0 {
		out.Annotations = maps.Clone(m.Annotations)
		delete(out.Annotations, corev1.LastAppliedConfigAnnotation)
		if len(out.Annotations) == 0 {
			out.Annotations = nil
		}
	}
	return out
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
