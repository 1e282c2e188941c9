package oracle

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
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
	managed     map[string]bool
	admissions  map[types.UID]*berthv1.Admission
	workloads   map[types.UID]string
	queues      map[string]*berthv1.ClusterQueue
	pods        map[types.UID]chargedPod
	usage       map[usageKey]int64
	violations  []string
	reportedPod map[types.UID]bool
}

// Replay applies the observations in revision order and returns every
// broken invariant:
//   - a Workload whose admission is replaced by another without being
//     cleared first (admitted twice in one cycle);
//   - a pod of a managed namespace bound to a node while it does not belong
//     to an admitted Workload (it runs outside quota);
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
	r.workloads[wl.UID] = wl.Namespace + "/" + wl.Name
	prev := r.admissions[wl.UID]
	next := wl.Status.Admission
	if o.Deleted {
		next = nil
	}
	if prev != nil && next != nil && !equality.Semantic.DeepEqual(prev, next) {
		r.violations = append(r.violations, fmt.Sprintf(
			"at revision %d Workload %s/%s was admitted again without being evicted: ClusterQueue %s, %v became ClusterQueue %s, %v",
			o.RV, wl.Namespace, wl.Name, prev.ClusterQueue, prev.PodSetAssignments, next.ClusterQueue, next.PodSetAssignments))
	}
	if next == nil {
		delete(r.admissions, wl.UID)
		return
	}
	r.admissions[wl.UID] = next.DeepCopy()
}

func (r *replay) pod(o Observation) {
	p := o.Pod
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
		if r.managed[p.Namespace] && !r.reportedPod[p.UID] {
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
	r.violations = append(r.violations, r.excess(o.RV, p, adm.ClusterQueue)...)
}

// charges maps the pod's requests of the resources its ClusterQueue covers
// to the flavors its pod set was assigned.
func (r *replay) charges(p *corev1.Pod, adm *berthv1.Admission) map[usageKey]int64 {
	psa := podSetOf(p, adm)
	if psa == nil {
		return nil
	}
	covered := map[corev1.ResourceName]bool{}
	if cq := r.queues[adm.ClusterQueue]; cq != nil {
		for _, rg := range cq.Spec.ResourceGroups {
			for _, res := range rg.CoveredResources {
				covered[res] = true
			}
		}
	}
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

// excess describes how the usage of ClusterQueue cq, or of its cohort,
// exceeds its quota right after pod p was bound.
func (r *replay) excess(rv uint64, p *corev1.Pod, cqName string) []string {
	cq := r.queues[cqName]
	if cq == nil {
		return []string{fmt.Sprintf("at revision %d pod %s/%s was bound on quota of ClusterQueue %s, which does not exist",
			rv, p.Namespace, p.Name, cqName)}
	}
	var out []string
	for _, rg := range cq.Spec.ResourceGroups {
		for _, fq := range rg.Flavors {
			for _, rq := range fq.Resources {
				k := usageKey{cq: cq.Name, flavor: fq.Name, resource: rq.Name}
				used := r.usage[k]
				limit, bounded := cqLimit(cq, rq)
				if bounded && used > limit {
					out = append(out, fmt.Sprintf(
						"at revision %d, after pod %s/%s was bound, ClusterQueue %s used %dm of %s in flavor %s, its limit is %dm",
						rv, p.Namespace, p.Name, cq.Name, used, rq.Name, fq.Name, limit))
				}
				if cq.Spec.Cohort != "" {
					out = append(out, r.cohortExcess(rv, p, cq.Spec.Cohort, fq.Name, rq.Name)...)
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
func (r *replay) cohortExcess(rv uint64, p *corev1.Pod, cohort, flavor string, res corev1.ResourceName) []string {
	var used, pool int64
	for _, cq := range r.queues {
		if cq.Spec.Cohort != cohort {
			continue
		}
		used += r.usage[usageKey{cq: cq.Name, flavor: flavor, resource: res}]
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
	return []string{fmt.Sprintf("at revision %d, after pod %s/%s was bound, cohort %s used %dm of %s in flavor %s, its pool is %dm",
		rv, p.Namespace, p.Name, cohort, used, res, flavor, pool)}
}
