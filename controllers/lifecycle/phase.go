// Package lifecycle owns a Workload's status. Every controller that changes
// what a Workload's status says — the scheduler admitting, evicting and
// reporting why a workload waits, the provisioning controller reporting the
// autoscaler's answers, the job adapters reporting that a job stopped,
// shrank or finished, the queue controller draining — does it through this
// package, and only through it.
//
// A Workload's phase is computed from the object by one pure function,
// PhaseOf; nothing stores it. Each allowed change is one Transition, which
// knows the phases it may start from and refuses every other; it sets the
// status fields it owns and derives the QuotaReserved, Admitted and Evicted
// conditions from the phase it leads to, so the fields and conditions never
// disagree. Controllers decide when a transition happens; this package
// decides what the status becomes.
//
//	Pending ──Admit──────────────▶ Admitted ──PodsReady──▶ Running
//	   │                             ▲   │                    │
//	   └─Reserve─▶ Reserved ─Provision┘   └──────Evict─────────┤
//	                 │  │                                      ▼
//	 Pending/GaveUp ◀┘  └─Evict (no pods yet)─▶ Pending     Evicting ─Requeue─▶ Pending/GaveUp
//	 (FailBooking)                                                          (pods gone)
//	any phase ──Finish──▶ Finished
//
// Transitions take the time from the caller's clock; nothing here reads
// the wall clock.
package lifecycle

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Phase is where a Workload is in its lifecycle.
type Phase string

const (
	// Pending means the workload waits for quota (also after a failed booking,
	// until its retry time, and after an eviction once its pods are gone).
	Pending Phase = "Pending"
	// GaveUp means maxAttempts bookings failed in a row; the workload is not
	// queued until its Workload is deleted.
	GaveUp Phase = "GaveUp"
	// Reserved means the workload holds quota while a ProvisioningRequest books
	// its capacity; its job is held.
	Reserved Phase = "Reserved"
	// Admitted means the workload holds quota and its gang may run.
	Admitted Phase = "Admitted"
	// Running means admitted on booked capacity, and every pod of the gang was
	// Ready in time.
	Running Phase = "Running"
	// Evicting means the workload still holds quota while its job is stopped.
	Evicting Phase = "Evicting"
	// Finished means the job ended; the quota is released.
	Finished Phase = "Finished"
)

// PhaseOf computes a Workload's phase from its status.
func PhaseOf(wl *berthv1.Workload) Phase {
	st := &wl.Status
	switch {
	case isTrue(wl, berthv1.ConditionFinished):
		return Finished
	case st.Admission == nil:
		if p := st.Provisioning; p != nil && p.GaveUp {
			return GaveUp
		}
		return Pending
	case isTrue(wl, berthv1.ConditionEvicted):
		return Evicting
	case booking(wl):
		return Reserved
	case isTrue(wl, berthv1.ConditionPodsReady):
		return Running
	}
	return Admitted
}

// booking reports whether the admission's capacity is still being booked.
func booking(wl *berthv1.Workload) bool {
	p := wl.Status.Provisioning
	return wl.Status.Admission.Provisioning != nil && p != nil && p.State == berthv1.ProvisioningPending
}

// HoldsQuota reports whether a workload in phase p counts against its
// ClusterQueue's quota.
func HoldsQuota(p Phase) bool {
	return p == Reserved || p == Admitted || p == Running || p == Evicting
}

// MayRun reports whether the job of a workload in phase p may run.
func MayRun(p Phase) bool { return p == Admitted || p == Running }

// IsFinished reports whether the workload's job ended.
func IsFinished(wl *berthv1.Workload) bool { return isTrue(wl, berthv1.ConditionFinished) }

// Condition returns the workload's condition of type t, or nil.
func Condition(wl *berthv1.Workload, t string) *metav1.Condition {
	return meta.FindStatusCondition(wl.Status.Conditions, t)
}

func isTrue(wl *berthv1.Workload, t string) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, t)
}

// OwnerOf is a reference object for the workload's controlling owner (its
// job), so that events about the workload also show on the job users look
// at; nil when it has none.
func OwnerOf(wl *berthv1.Workload) *metav1.PartialObjectMetadata {
	ref := metav1.GetControllerOf(wl)
	if ref == nil {
		return nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: ref.Name, UID: ref.UID},
	}
}
