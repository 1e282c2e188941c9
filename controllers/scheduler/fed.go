package scheduler

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// fedInput is the part of a Workload the engine's form is converted from
// (lifecycle.WorkloadToEngine), kept in the API's form: the spec (with
// spec.active) through its generation, the admission, the booking record,
// the phase (an eviction in progress), PodsReady, and where it queues with
// the facts about its queues. Most Workload events change none of it — a pending reason or
// an event written, PodsHeld, a finalizer — and need no conversion and no
// cycle.
type fedInput struct {
	uid        types.UID
	generation int64
	// queue holds the facts about the workload's queues too: its
	// LocalQueue's state and whether the namespace is accepted.
	queue        lifecycle.QueueRef
	phase        lifecycle.Phase
	podsReady    bool
	admission    *berthv1.Admission
	provisioning *berthv1.ProvisioningStatus
}

// inputOf is the engine's input of wl queued in q; it copies what it
// keeps, as callers may change wl after.
func inputOf(wl *berthv1.Workload, q lifecycle.QueueRef) fedInput {
	return fedInput{
		uid: wl.UID, generation: wl.Generation, queue: q, phase: lifecycle.PhaseOf(wl),
		podsReady:    meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionPodsReady),
		admission:    wl.Status.Admission.DeepCopy(),
		provisioning: wl.Status.Provisioning.DeepCopy(),
	}
}

// same reports whether two inputs convert to the same engine workload. A
// generation of 0 (an object not read from the API server) is never the
// same.
func (f fedInput) same(o fedInput) bool {
	return f.generation != 0 && f.uid == o.uid && f.generation == o.generation && f.queue == o.queue &&
		f.phase == o.phase && f.podsReady == o.podsReady && equality.Semantic.DeepEqual(f.admission, o.admission) &&
		equality.Semantic.DeepEqual(f.provisioning, o.provisioning)
}

// fedInputs holds the input the engine was last given per workload. An
// entry stands only while the engine's state of the workload is what that
// input made it: every decision the engine takes about a workload, and
// every rollback, drops its entry (forget), so the next event converts it
// again.
type fedInputs map[admission.WorkloadKey]fedInput

// unchanged reports whether in is what the engine was last given for key.
func (f fedInputs) unchanged(key admission.WorkloadKey, in fedInput) bool {
	prev, ok := f[key]
	return ok && prev.same(in)
}

// forgetDecided drops the entries of the workloads a cycle decided about.
func (f fedInputs) forgetDecided(res admission.Result) {
	for _, a := range res.Admitted {
		delete(f, a.Key)
	}
	for _, p := range res.Preemptions {
		delete(f, p.Victim)
	}
	for _, b := range res.Bookings {
		delete(f, b.Key)
	}
	for _, e := range res.Evictions {
		delete(f, e.Key)
	}
}
