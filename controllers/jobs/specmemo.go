package jobs

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// specMemo remembers, per Workload, the job and Workload versions that were
// last found in step, so that an event that changed neither — a status
// update of a running job, a pending reason written on its Workload — does
// not read the job's gang again (PodSets, DRA claims, PriorityClass,
// scheduling templates) only to find it equal.
//
// It is kept in memory, never on an object: a tenant who may edit the
// Workload could otherwise write a stamp that makes berth skip a job whose
// requests grew. After a restart it is empty and every job is read once.
//
// Only kinds whose gang is read from the object alone are memoised: a job
// that is not a Splitter, Resolver, Loader or Releaser, whose spec changes
// bump metadata.generation, and whose pods use no ResourceClaims. What the gang
// reads outside the spec — the labels and annotations below — is part of
// the stamp. A PriorityClass's value is immutable and tenants cannot
// create one, so the priority read once stays right.
type specMemo struct {
	mu      sync.Mutex
	inStep  map[types.NamespacedName]specStamp
	enabled bool
}

// specStamp is what a gang's Workload spec was derived from.
type specStamp struct {
	jobUID        types.UID
	jobGeneration int64
	priorityClass string
	topology      string // required and preferred annotations
	ownScheduling string
	workloadUID   types.UID
	workloadGen   int64
}

// newSpecMemo returns a memo for kind, disabled for kinds whose gang is
// not read from one object (a Splitter's gangs, a Resolver's pods, a
// Loader's other objects).
func newSpecMemo(kind Kind) *specMemo {
	_, splits := kind.(Splitter)
	_, resolves := kind.(Resolver)
	_, loads := kind.(Loader)
	return &specMemo{inStep: map[types.NamespacedName]specStamp{}, enabled: !splits && !resolves && !loads}
}

// stampOf is the stamp of job and wl as they are now; ok is false when the
// job cannot be memoised: it releases pods one by one (its gang counts
// pods, which bump no generation), or it has no generation (it was not
// read from the API server).
func stampOf(job GenericJob, wl *berthv1.Workload) (specStamp, bool) {
	if _, releases := job.(Releaser); releases {
		return specStamp{}, false
	}
	// A pod that uses ResourceClaims costs what its claims' templates ask
	// for, and a tenant may delete and recreate a ResourceClaimTemplate
	// under the same name without changing the job: such a gang is read on
	// every event, so a larger claim is seen before the job starts or
	// replaces a pod.
	for _, t := range job.PodTemplates() {
		if t.Spec != nil && len(t.Spec.ResourceClaims) > 0 {
			return specStamp{}, false
		}
	}
	obj := job.Object()
	if obj.GetGeneration() == 0 || wl.UID == "" || wl.Generation == 0 {
		return specStamp{}, false
	}
	ann := obj.GetAnnotations()
	return specStamp{
		jobUID: obj.GetUID(), jobGeneration: obj.GetGeneration(),
		priorityClass: obj.GetLabels()[berthv1.PriorityClassLabel],
		topology:      ann[berthv1.TopologyRequiredAnnotation] + "\x00" + ann[berthv1.TopologyPreferredAnnotation],
		ownScheduling: ann[berthv1.OriginalSchedulingAnnotation],
		workloadUID:   wl.UID, workloadGen: wl.Generation,
	}, true
}

// unchanged reports whether job and wl are as they were when last found in
// step.
func (m *specMemo) unchanged(job GenericJob, wl *berthv1.Workload) bool {
	if !m.enabled {
		return false
	}
	s, ok := stampOf(job, wl)
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, found := m.inStep[types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}]
	return found && prev == s
}

// inStepNow records that wl's spec is the job's gang as they are now.
func (m *specMemo) inStepNow(job GenericJob, wl *berthv1.Workload) {
	if !m.enabled {
		return
	}
	s, ok := stampOf(job, wl)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inStep[types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}] = s
}

// inStepIf records that wl is in step with the job when spec, just read
// from it, is exactly wl's spec; a check that compared less (the pod sets
// alone) must not vouch for the rest.
func (m *specMemo) inStepIf(spec gangSpec, job GenericJob, wl *berthv1.Workload) {
	if spec.equals(&wl.Spec) {
		m.inStepNow(job, wl)
	}
}

// forget drops what is known of a Workload: it is gone, or its job changed
// in a way the reconciler acted on.
func (m *specMemo) forget(namespace, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.inStep, types.NamespacedName{Namespace: namespace, Name: name})
}
