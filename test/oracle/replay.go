package oracle

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// Observation is one version of an object as a watch delivered it: the
// object after the write at revision RV, or, when Deleted, the object as
// it was when it was deleted at RV. Exactly one of the object fields is set.
type Observation struct {
	// RV is the etcd revision of the write. One etcd holds every resource
	// in the planes berth is tested on, so revisions order writes across
	// resources.
	RV uint64
	// Deleted marks the deletion of the object.
	Deleted bool
	// Listed marks a version the recorder found when it started, not one
	// written while it watched: a baseline, charged but not judged.
	Listed bool

	Workload     *berthv1.Workload
	Pod          *corev1.Pod
	ClusterQueue *berthv1.ClusterQueue
}

// usageKey is one resource of one flavor of one ClusterQueue.
type usageKey struct {
	cq, flavor string
	resource   corev1.ResourceName
}

// chargedPod is a bound, non-terminal pod and what it is charged to.
type chargedPod struct {
	name    string
	charges map[usageKey]int64
}

// replay holds the state of a Replay between observations.
type replay struct {
	managed    map[string]bool
	admissions map[types.UID]*berthv1.Admission
	workloads  map[types.UID]string
	queues     map[string]*berthv1.ClusterQueue
	pods       map[types.UID]chargedPod
	usage      map[usageKey]int64
	held       map[types.UID]map[usageKey]int64
	heldUsage  map[usageKey]int64
	// recorded are the admissions of the pods that carry their own
	// record, by pod UID.
	recorded    map[types.UID]*berthv1.Admission
	violations  []string
	reportedPod map[types.UID]bool
}

// Replay applies the observations in revision order and returns every
// broken invariant:
//   - a Workload whose admission is replaced by another without being
//     cleared first (admitted twice in one cycle), or that is admitted
//     while it is being deleted;
//   - an admission after which the Workloads holding quota of a
//     ClusterQueue (reserved, admitted, running or evicting) request more
//     than its quota, or than its cohort's;
//   - a replica released on a record of its own (berthv1.AdmissionRecordAnnotation)
//     after which the quota held exceeds the same limits: a record holds
//     quota as an admitted Workload does;
//   - a pod of a managed namespace bound to a node while it does not belong
//     to an admitted Workload and carries no record berth counts (it runs
//     outside quota);
//   - a bound pod after whose binding the requests of the bound,
//     non-terminal pods charged to a ClusterQueue exceed its quota (nominal
//     plus borrowing limit, or, in a cohort without a borrowing limit, the
//     cohort's nominal quota in total).
//
// Pods count from the revision they are seen bound until they are terminal
// or deleted; a deleting pod still holds its node's devices until it is
// gone. Only resources a ClusterQueue covers are charged.
func Replay(obs []Observation, managedNamespaces []string) []string {
	r := &replay{
		managed: map[string]bool{}, admissions: map[types.UID]*berthv1.Admission{},
		workloads: map[types.UID]string{}, queues: map[string]*berthv1.ClusterQueue{},
		pods: map[types.UID]chargedPod{}, usage: map[usageKey]int64{}, reportedPod: map[types.UID]bool{},
		held: map[types.UID]map[usageKey]int64{}, heldUsage: map[usageKey]int64{}, recorded: map[types.UID]*berthv1.Admission{},
	}
	for _, ns := range managedNamespaces {
		r.managed[ns] = true
	}
	sorted := slices.Clone(obs)
	slices.SortStableFunc(sorted, func(a, b Observation) int {
		switch {
		case a.RV < b.RV:
			return -1
		case a.RV > b.RV:
			return 1
		}
		return 0
	})
	for _, o := range sorted {
		switch {
		case o.ClusterQueue != nil:
			if o.Deleted {
				delete(r.queues, o.ClusterQueue.Name)
			} else {
				r.queues[o.ClusterQueue.Name] = o.ClusterQueue
			}
		case o.Workload != nil:
			r.workload(o)
		case o.Pod != nil:
			r.pod(o)
		}
	}
	return r.violations
}

func (r *replay) workload(o Observation) {
	wl := o.Workload
	name := wl.Namespace + "/" + wl.Name
	// What the recorder found when it started is a baseline: charged, but
	// not judged as an admission.
	seen := !o.Listed
	r.workloads[wl.UID] = name
	prev := r.admissions[wl.UID]
	next := wl.Status.Admission
	if o.Deleted {
		next = nil
	}
	if prev != nil && next != nil && !equality.Semantic.DeepEqual(prev, next) && !shrunk(prev, next) {
		r.violations = append(r.violations, fmt.Sprintf(
			"at revision %d Workload %s was admitted again without being evicted: ClusterQueue %s, %v became ClusterQueue %s, %v",
			o.RV, name, prev.ClusterQueue, prev.PodSetAssignments, next.ClusterQueue, next.PodSetAssignments))
	}
	if seen && prev == nil && next != nil && wl.DeletionTimestamp != nil {
		r.violations = append(r.violations, fmt.Sprintf("at revision %d Workload %s was admitted while being deleted", o.RV, name))
	}
	r.hold(o, seen)
	if next == nil {
		delete(r.admissions, wl.UID)
		return
	}
	r.admissions[wl.UID] = next.DeepCopy()
}

// hold charges a Workload that holds quota with what its admission
// requests, and checks its ClusterQueue's quota when it starts to hold.
func (r *replay) hold(o Observation, seen bool) {
	wl := o.Workload
	old, had := r.held[wl.UID]
	for k, v := range old {
		r.heldUsage[k] -= v
	}
	delete(r.held, wl.UID)
	if o.Deleted || !lifecycle.HoldsQuota(lifecycle.PhaseOf(wl)) {
		return
	}
	adm := wl.Status.Admission
	charges := r.admissionCharges(adm, wl.Spec.PodSets)
	for k, v := range charges {
		r.heldUsage[k] += v
	}
	r.held[wl.UID] = charges
	if seen && !had {
		after := fmt.Sprintf("Workload %s/%s was admitted", wl.Namespace, wl.Name)
		r.violations = append(r.violations, r.excess(o.RV, after, "admitted Workloads", adm.ClusterQueue, r.heldUsage)...)
	}
}

// admissionCharges is what an admission of podSets holds.
func (r *replay) admissionCharges(adm *berthv1.Admission, podSets []berthv1.PodSet) map[usageKey]int64 {
	charges := map[usageKey]int64{}
	covered := r.covered(adm.ClusterQueue)
	for _, psa := range adm.PodSetAssignments {
		for _, ps := range podSets {
			if ps.Name != psa.Name {
				continue
			}
			for res, q := range ps.Requests {
				if flavor, ok := psa.Flavors[res]; ok && covered[res] {
					charges[usageKey{cq: adm.ClusterQueue, flavor: flavor, resource: res}] += q.MilliValue() * int64(psa.Count)
				}
			}
		}
	}
	return charges
}

// record holds the quota of a replica whose pod carries its record
// (lifecycle.RecordOf says which records berth counts) as an admitted
// Workload's, from the revision the record appears until the pod ends or
// is gone, and checks its ClusterQueue's quota when it starts to hold.
// It returns the record's admission, nil for a pod without one.
func (r *replay) record(o Observation) *berthv1.Admission {
	p := o.Pod
	if o.Deleted || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		for k, v := range r.held[p.UID] {
			r.heldUsage[k] -= v
		}
		delete(r.held, p.UID)
		delete(r.recorded, p.UID)
		return nil
	}
	if adm := r.recorded[p.UID]; adm != nil {
		return adm
	}
	rec, has, err := lifecycle.RecordOf(p)
	if !has || err != nil {
		return nil
	}
	adm := rec.Admission.DeepCopy()
	charges := r.admissionCharges(adm, rec.Spec.PodSets)
	for k, v := range charges {
		r.heldUsage[k] += v
	}
	r.held[p.UID], r.recorded[p.UID] = charges, adm
	if !o.Listed {
		after := fmt.Sprintf("pod %s/%s was released on its record", p.Namespace, p.Name)
		r.violations = append(r.violations, r.excess(o.RV, after, "admitted Workloads", adm.ClusterQueue, r.heldUsage)...)
	}
	return adm
}

// covered is the set of resources ClusterQueue cq covers.
func (r *replay) covered(cq string) map[corev1.ResourceName]bool {
	out := map[corev1.ResourceName]bool{}
	if q := r.queues[cq]; q != nil {
		for _, rg := range q.Spec.ResourceGroups {
			for _, res := range rg.CoveredResources {
				out[res] = true
			}
		}
	}
	return out
}

func (r *replay) pod(o Observation) {
	p := o.Pod
	recorded := r.record(o)
	if _, charged := r.pods[p.UID]; charged {
		if o.Deleted || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			for k, v := range r.pods[p.UID].charges {
				r.usage[k] -= v
			}
			delete(r.pods, p.UID)
		}
		return
	}
	if o.Deleted || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	uid := types.UID(p.Labels[berthv1.WorkloadLabel])
	adm := r.admissions[uid]
	if adm == nil {
		adm = recorded
	}
	if adm == nil {
		if r.managed[p.Namespace] && !r.reportedPod[p.UID] && !o.Listed {
			r.reportedPod[p.UID] = true
			r.violations = append(r.violations, fmt.Sprintf(
				"at revision %d pod %s/%s is bound to node %s without an admitted Workload (label %s=%q): it runs outside quota",
				o.RV, p.Namespace, p.Name, p.Spec.NodeName, berthv1.WorkloadLabel, uid))
		}
		return
	}
	charges := r.charges(p, adm)
	r.pods[p.UID] = chargedPod{name: p.Namespace + "/" + p.Name, charges: charges}
	for k, v := range charges {
		r.usage[k] += v
	}
	if o.Listed {
		return // bound before the recorder started: a baseline
	}
	after := fmt.Sprintf("pod %s/%s was bound", p.Namespace, p.Name)
	r.violations = append(r.violations, r.excess(o.RV, after, "bound pods", adm.ClusterQueue, r.usage)...)
}

// charges maps the pod's requests of the resources its ClusterQueue covers
// to the flavors its pod set was assigned.
func (r *replay) charges(p *corev1.Pod, adm *berthv1.Admission) map[usageKey]int64 {
	psa := podSetOf(p, adm)
	if psa == nil {
		return nil
	}
	covered := r.covered(adm.ClusterQueue)
	out := map[usageKey]int64{}
	for res, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
		flavor, ok := psa.Flavors[res]
		if !ok || !covered[res] {
			continue
		}
		out[usageKey{cq: adm.ClusterQueue, flavor: flavor, resource: res}] += q.MilliValue()
	}
	return out
}

// podSetOf is the pod set assignment the pod belongs to: the one its
// pod-set label names, else the only one.
func podSetOf(p *corev1.Pod, adm *berthv1.Admission) *berthv1.PodSetAssignment {
	name, labelled := p.Labels[berthv1.PodSetLabel]
	for i := range adm.PodSetAssignments {
		if psa := &adm.PodSetAssignments[i]; psa.Name == name || (!labelled && len(adm.PodSetAssignments) == 1) {
			return psa
		}
	}
	return nil
}

// excess describes how what of ClusterQueue cqName (its bound pods or its
// admitted Workloads), or of its cohort, uses more than its quota in usage,
// right after the write described by after.
func (r *replay) excess(rv uint64, after, what, cqName string, usage map[usageKey]int64) []string {
	cq := r.queues[cqName]
	if cq == nil {
		return []string{fmt.Sprintf("at revision %d, after %s, on quota of ClusterQueue %s, which does not exist", rv, after, cqName)}
	}
	var out []string
	for _, rg := range cq.Spec.ResourceGroups {
		for _, fq := range rg.Flavors {
			for _, rq := range fq.Resources {
				used := usage[usageKey{cq: cq.Name, flavor: fq.Name, resource: rq.Name}]
				limit, bounded := cqLimit(cq, rq)
				if bounded && used > limit {
					out = append(out, fmt.Sprintf(
						"at revision %d, after %s, the %s of ClusterQueue %s used %dm of %s in flavor %s, its limit is %dm",
						rv, after, what, cq.Name, used, rq.Name, fq.Name, limit))
				}
				if cq.Spec.Cohort != "" {
					out = append(out, r.cohortExcess(rv, after, what, usage, cq.Spec.Cohort, fq.Name, rq.Name)...)
				}
			}
		}
	}
	return out
}

// cqLimit is what one ClusterQueue may use of a resource of a flavor:
// unbounded by itself when it may borrow from a cohort without a limit.
func cqLimit(cq *berthv1.ClusterQueue, rq berthv1.ResourceQuota) (int64, bool) {
	switch {
	case cq.Spec.Cohort == "":
		return rq.NominalQuota.MilliValue(), true
	case rq.BorrowingLimit != nil:
		return rq.NominalQuota.MilliValue() + rq.BorrowingLimit.MilliValue(), true
	}
	return 0, false
}

// cohortExcess describes how the cohort's members together use more of a
// resource of a flavor than their nominal quotas add up to.
func (r *replay) cohortExcess(rv uint64, after, what string, usage map[usageKey]int64, cohort, flavor string, res corev1.ResourceName) []string {
	var used, pool int64
	for _, cq := range r.queues {
		if cq.Spec.Cohort != cohort {
			continue
		}
		used += usage[usageKey{cq: cq.Name, flavor: flavor, resource: res}]
		for _, rg := range cq.Spec.ResourceGroups {
			for _, fq := range rg.Flavors {
				for _, rq := range fq.Resources {
					if fq.Name == flavor && rq.Name == res {
						pool += rq.NominalQuota.MilliValue()
					}
				}
			}
		}
	}
	if used <= pool {
		return nil
	}
	return []string{fmt.Sprintf("at revision %d, after %s, the %s of cohort %s used %dm of %s in flavor %s, its pool is %dm",
		rv, after, what, cohort, used, res, flavor, pool)}
}

// shrunk reports whether admission next is prev with fewer pods in some pod
// sets and nothing else changed: a running job that shrank keeps its
// admission for the pods it still runs and gives back the rest, which is
// no second admission.
func shrunk(prev, next *berthv1.Admission) bool {
	if prev.ClusterQueue != next.ClusterQueue || len(prev.PodSetAssignments) != len(next.PodSetAssignments) {
		return false
	}
	for i := range prev.PodSetAssignments {
		p, n := prev.PodSetAssignments[i], next.PodSetAssignments[i]
		if n.Count > p.Count {
			return false
		}
		p.Count = n.Count
		if !equality.Semantic.DeepEqual(p, n) {
			return false
		}
	}
	return equality.Semantic.DeepEqual(prev.Topology, next.Topology)
}
