package lifecycle

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// defaultWeight is a fair-sharing weight of 1, in the engine's milli-units.
const defaultWeight = 1000

// ClusterQueueToEngine translates a ClusterQueue into the engine's form,
// with the node labels of the flavors it lists (by flavor name) as read
// with it: the engine judges a flavor by the labels its queue brought.
func ClusterQueueToEngine(cq *berthv1.ClusterQueue, nodeLabels map[string]map[string]string) admission.ClusterQueue {
	out := admission.ClusterQueue{
		Name:             cq.Name,
		Cohort:           cq.Spec.Cohort,
		QueueingStrategy: queueingStrategies.engine(cq.Spec.QueueingStrategy),
		Preemption: admission.PreemptionPolicy{
			WithinClusterQueue:  preemptionModes.engine(cq.Spec.Preemption.WithinClusterQueue),
			ReclaimWithinCohort: preemptionModes.engine(cq.Spec.Preemption.ReclaimWithinCohort),
		},
		FairShareWeight: defaultWeight,
		Stopped:         Stopped(cq.Spec.StopPolicy),
		Drain:           cq.Spec.StopPolicy == berthv1.StopPolicyHoldAndDrain,
	}
	if out.QueueingStrategy == "" {
		out.QueueingStrategy = admission.BestEffortFIFO
	}
	if w := cq.Spec.FairSharing.Weight; w != nil {
		out.FairShareWeight = w.MilliValue()
	}
	for _, g := range cq.Spec.ResourceGroups {
		eg := admission.ResourceGroup{}
		for _, r := range g.CoveredResources {
			eg.CoveredResources = append(eg.CoveredResources, admission.ResourceName(r))
		}
		for _, f := range g.Flavors {
			fq := admission.FlavorQuotas{Flavor: f.Name, Resources: make(map[admission.ResourceName]admission.Quota, len(f.Resources)),
				NodeLabels: nodeLabels[f.Name]}
			for _, r := range f.Resources {
				fq.Resources[admission.ResourceName(r.Name)] = admission.Quota{
					Nominal:        milli(r.NominalQuota),
					BorrowingLimit: milliPtr(r.BorrowingLimit),
					LendingLimit:   milliPtr(r.LendingLimit),
				}
			}
			eg.Flavors = append(eg.Flavors, fq)
		}
		out.ResourceGroups = append(out.ResourceGroups, eg)
	}
	return out
}

func milliPtr(q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	v := milli(*q)
	return &v
}

// maxMilli is the largest amount the engine accepts, as a quantity.
var maxMilli = resource.NewMilliQuantity(admission.MaxAmount, resource.DecimalSI)

// milli is q in milli-units. Quantity.MilliValue wraps around beyond int64
// (1e18 GPUs read as 0, 2^63-1 as -1000), which would charge an absurd
// request nothing or less than nothing; an amount the engine cannot hold
// becomes one more than its bound, so the engine refuses it as invalid.
func milli(q resource.Quantity) int64 {
	abs := q.DeepCopy()
	if abs.Sign() < 0 {
		abs.Neg()
	}
	switch {
	case abs.Cmp(*maxMilli) <= 0:
		return q.MilliValue()
	case q.Sign() < 0:
		return -admission.MaxAmount - 1
	default:
		return admission.MaxAmount + 1
	}
}

// QueueRef is where a workload is queued: the engine reads it beside the
// Workload, which names only its LocalQueue.
type QueueRef struct {
	// ClusterQueue the workload is queued in (for an admitted one, the one
	// of its admission).
	ClusterQueue string
	// LocalQueueWeight is the LocalQueue's fair-sharing weight in
	// milli-units (0 for an admitted workload, which is not queued).
	LocalQueueWeight int64
	// LocalQueueState is the state of the workload's LocalQueue: missing or
	// stopped, the engine holds a pending workload; drained, it evicts an
	// admitted one.
	LocalQueueState admission.LocalQueueState
	// NamespaceRefusal says that the ClusterQueue does not accept the
	// workload's namespace; the engine holds a pending workload then.
	NamespaceRefusal admission.NamespaceRefusal
	// PriorityClassRefused names the PriorityClass the workload takes its
	// priority from when its LocalQueue does not let it (RefusedPriorityClass);
	// the engine holds a pending workload then.
	PriorityClassRefused string
}

// localQueueStates is the engine's form of a LocalQueue's stopPolicy; a
// policy not listed (None) leaves it open.
var localQueueStates = map[berthv1.StopPolicy]admission.LocalQueueState{
	berthv1.StopPolicyHold:         admission.LocalQueueHold,
	berthv1.StopPolicyHoldAndDrain: admission.LocalQueueHoldAndDrain,
}

// QueueOf is where a LocalQueue queues its pending workloads: its
// ClusterQueue, with the LocalQueue's fair-sharing weight and its state.
func QueueOf(lq *berthv1.LocalQueue) QueueRef {
	q := QueueRef{ClusterQueue: lq.Spec.ClusterQueue, LocalQueueWeight: defaultWeight, LocalQueueState: localQueueStates[lq.Spec.StopPolicy]}
	if fs := lq.Spec.FairSharing; fs != nil && fs.Weight != nil && fs.Weight.Sign() > 0 {
		q.LocalQueueWeight = fs.Weight.MilliValue()
	}
	return q
}

// RefusedPriorityClass names the PriorityClass wl takes its priority from
// when LocalQueue lq does not let it: a class of value above 0 that lq does
// not list in spec.priorityClasses. "" when it may. A class of value 0 or
// less orders a workload no higher than naming none, so it needs no grant.
func RefusedPriorityClass(lq *berthv1.LocalQueue, wl *berthv1.Workload) string {
	if wl.Spec.Priority <= 0 || slices.Contains(lq.Spec.PriorityClasses, wl.Spec.PriorityClassName) {
		return ""
	}
	return wl.Spec.PriorityClassName
}

// WorkloadToEngine translates a Workload, queued in q, into the engine's
// form. An admitted workload carries its admission, so that the engine counts
// its usage and never admits it again.
func WorkloadToEngine(wl *berthv1.Workload, q QueueRef) admission.Workload {
	out := admission.Workload{
		Key:              KeyOf(wl),
		UID:              string(wl.UID),
		ClusterQueue:     q.ClusterQueue,
		LocalQueue:       wl.Spec.QueueName,
		LocalQueueWeight: q.LocalQueueWeight,
		Priority:         wl.Spec.Priority,
		CreationTime:     wl.CreationTimestamp.UnixNano(),
		PodSets:          make([]admission.PodSet, 0, len(wl.Spec.PodSets)),
		Generation:       wl.Generation,
		Booking:          BookingToEngine(wl),
		Inactive:         !wl.IsActive(),
		LocalQueueState:  q.LocalQueueState,
		NamespaceRefusal: q.NamespaceRefusal,
		Evicting:         PhaseOf(wl) == Evicting,

		PriorityClassRefused: q.PriorityClassRefused,
	}
	if t := wl.Spec.Topology; t != nil {
		out.Topology = &admission.TopologyRequest{Mode: topologyModes.engine(t.Mode), Level: t.Level}
	}
	for _, ps := range wl.Spec.PodSets {
		out.PodSets = append(out.PodSets, admission.PodSet{Name: ps.Name, Count: ps.Count, Requests: resourcesToEngine(ps.Requests),
			Nodes: nodeFilter(ps.Template), Apart: apartOf(wl.Namespace, ps.Template, wl.Spec.PodSets), Tolerations: tolerationsOf(ps.Template)})
		if out.ForeignHeadroom == "" && q.ClusterQueue != "" {
			out.ForeignHeadroom = foreignHeadroom(ps.Template, q.ClusterQueue)
		}
	}
	if a := wl.Status.Admission; a != nil {
		out.ClusterQueue = a.ClusterQueue
		out.Admission = AdmissionToEngine(a, wl.Status.Provisioning)
		out.Admission.Generation = wl.Generation
	}
	return out
}

// BookingToEngine is the engine's form of a workload's booking record
// (status.provisioning), nil when it never booked capacity.
func BookingToEngine(wl *berthv1.Workload) *admission.Booking {
	p := wl.Status.Provisioning
	if p == nil {
		return nil
	}
	b := &admission.Booking{
		Attempt: p.Attempt, Failures: p.Failures, State: bookingStates.engine(p.State), Flavor: p.Flavor,
		CapacityNotFoundSince: unixNano(p.CapacityNotFoundSince), RetryAfter: unixNano(p.RetryAfter), GaveUp: p.GaveUp,
		PodsReady: meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionPodsReady),
	}
	if p.Topology != nil {
		d := assignmentToEngine(*p.Topology)
		b.Domain = &d
	}
	for _, d := range p.FailedDomains {
		b.FailedDomains = append(b.FailedDomains, assignmentToEngine(d))
	}
	return b
}

func assignmentToEngine(t berthv1.TopologyAssignment) admission.TopologyAssignment {
	out := admission.TopologyAssignment{Flavor: t.Flavor, Levels: slices.Clone(t.Levels), Domain: slices.Clone(t.Values)}
	if len(t.Levels) > 0 {
		out.Level = t.Levels[len(t.Levels)-1]
	}
	return out
}

// AssignmentToAPI is the API form of an engine topology assignment.
func AssignmentToAPI(t admission.TopologyAssignment) berthv1.TopologyAssignment {
	return berthv1.TopologyAssignment{Flavor: t.Flavor, Levels: slices.Clone(t.Levels), Values: slices.Clone(t.Domain)}
}

func unixNano(t *metav1.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixNano()
}

func resourcesToEngine(rl corev1.ResourceList) admission.Resources {
	out := make(admission.Resources, len(rl))
	for name, q := range rl {
		out[admission.ResourceName(name)] = milli(q)
	}
	return out
}

// AdmissionToEngine translates a persisted admission, and the booking it
// made (p, which names its flavor and attempt), into the engine's form.
func AdmissionToEngine(a *berthv1.Admission, p *berthv1.ProvisioningStatus) *admission.Admission {
	out := &admission.Admission{ClusterQueue: a.ClusterQueue}
	for _, psa := range a.PodSetAssignments {
		flavors := make(map[admission.ResourceName]string, len(psa.Flavors))
		for r, f := range psa.Flavors {
			flavors[admission.ResourceName(r)] = f
		}
		out.PodSets = append(out.PodSets, admission.PodSetAssignment{Name: psa.Name, Count: psa.Count, Flavors: flavors})
	}
	if t := a.Topology; t != nil && len(t.Levels) > 0 {
		d := assignmentToEngine(*t)
		out.Topology = &d
	}
	if ap := a.Provisioning; ap != nil {
		plan := &admission.ProvisioningPlan{Class: ClassToEngine(ap.ClassName), NewNodes: map[string]int32{}}
		for _, n := range ap.NewNodes {
			plan.NewNodes[n.Pool] = n.Nodes
		}
		if p != nil {
			plan.Flavor, plan.Attempt = p.Flavor, p.Attempt
		}
		out.Provisioning = plan
	}
	return out
}

// AdmissionToAPI translates an engine admission into the form persisted in a
// Workload's status.
func AdmissionToAPI(a admission.Admission) *berthv1.Admission {
	out := &berthv1.Admission{ClusterQueue: a.ClusterQueue}
	for _, psa := range a.PodSets {
		flavors := make(map[corev1.ResourceName]string, len(psa.Flavors))
		for r, f := range psa.Flavors {
			flavors[corev1.ResourceName(r)] = f
		}
		out.PodSetAssignments = append(out.PodSetAssignments, berthv1.PodSetAssignment{Name: psa.Name, Count: psa.Count, Flavors: flavors})
	}
	if t := a.Topology; t != nil {
		d := AssignmentToAPI(*t)
		out.Topology = &d
	}
	if p := a.Provisioning; p != nil {
		ap := &berthv1.AdmissionProvisioning{ClassName: ClassToAPI(p.Class)}
		for _, pool := range slices.Sorted(maps.Keys(p.NewNodes)) {
			ap.NewNodes = append(ap.NewNodes, berthv1.PoolNodes{Pool: pool, Nodes: p.NewNodes[pool]})
		}
		out.Provisioning = ap
	}
	return out
}

// Quantity turns an engine amount (milli-units) back into a Quantity in the
// resource's usual notation: binary for bytes, whole units where exact.
func Quantity(name admission.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if name == admission.ResourceName(corev1.ResourceMemory) || name == admission.ResourceName(corev1.ResourceEphemeralStorage) {
		format = resource.BinarySI
	}
	if milli%1000 == 0 {
		return *resource.NewQuantity(milli/1000, format)
	}
	return *resource.NewMilliQuantity(milli, format)
}

// KeyOf is the engine key of a workload.
func KeyOf(wl *berthv1.Workload) admission.WorkloadKey {
	return admission.WorkloadKey{Namespace: wl.Namespace, Name: wl.Name}
}

// QueueFlavors is what the flavors a ClusterQueue lists say about it: the
// names that name no ResourceFlavor (the queue is held until they exist)
// and the node labels of the others, by name.
type QueueFlavors struct {
	Missing    []string
	NodeLabels map[string]map[string]string
}
