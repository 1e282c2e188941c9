package scheduler

import (
	"time"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// reasons maps every pending reason of the engine to the API's; a test
// checks that none is missing.
var reasons = map[admission.PendingReason]berthv1.WorkloadReason{
	admission.ClusterQueueNotFound:  berthv1.ReasonClusterQueueNotFound,
	admission.ClusterQueueStopped:   berthv1.ReasonClusterQueueStopped,
	admission.FlavorNotFound:        berthv1.ReasonFlavorsNotFound,
	admission.UnsupportedResource:   berthv1.ReasonUnsupportedResource,
	admission.ExceedsMaxQuota:       berthv1.ReasonExceedsMaxQuota,
	admission.InsufficientQuota:     berthv1.ReasonInsufficientQuota,
	admission.WaitingForPreemption:  berthv1.ReasonWaitingForPreemption,
	admission.BlockedByHead:         berthv1.ReasonBlockedByHead,
	admission.ReservedForHead:       berthv1.ReasonReservedForHead,
	admission.UnknownTopologyLevel:  berthv1.ReasonUnknownTopologyLevel,
	admission.TopologyUnavailable:   berthv1.ReasonTopologyUnavailable,
	admission.ExceedsDomainCapacity: berthv1.ReasonExceedsDomainCapacity,
	admission.ProvisioningBackoff:   berthv1.ReasonProvisioningFailed,
}

// ReasonOf is the API reason of an engine pending reason.
func ReasonOf(r admission.PendingReason) berthv1.WorkloadReason {
	if out, ok := reasons[r]; ok {
		return out
	}
	return berthv1.WorkloadReason(r)
}

// actionable reports whether a pending reason needs someone to act — the
// queue setup or the workload is wrong, or no domain could ever hold the
// gang — as opposed to the workload just waiting its turn.
func actionable(r admission.PendingReason) bool {
	switch r {
	case admission.ClusterQueueNotFound, admission.ClusterQueueStopped, admission.FlavorNotFound, admission.UnsupportedResource,
		admission.ExceedsMaxQuota, admission.UnknownTopologyLevel, admission.ExceedsDomainCapacity:
		return true
	}
	return false
}

// pendingNotes decide when a pending reason is written to a Workload's
// status. Writes are the API server's scarce resource, and in a deep
// backlog almost every workload is pending for a while, so:
//
//   - an actionable reason is written at once;
//   - a waiting reason (insufficient quota, behind the head, waiting for
//     preemption) only after the workload stayed pending for the delay —
//     most workloads are admitted sooner and never cost the write;
//   - a reason is written again only when it changes, not when only the
//     message's figures do.
//
// Callers hold the Scheduler's mutex.
type pendingNotes struct {
	delay time.Duration
	// notes are reasons not written yet, with when they are due.
	notes map[admission.WorkloadKey]pendingNote
	// written is the reason last written per still-pending workload.
	written map[admission.WorkloadKey]admission.PendingReason
}

// pendingNote is a pending reason not yet written.
type pendingNote struct {
	update admission.PendingUpdate
	due    time.Time
}

func newPendingNotes(delay time.Duration) pendingNotes {
	return pendingNotes{delay: delay, notes: map[admission.WorkloadKey]pendingNote{}, written: map[admission.WorkloadKey]admission.PendingReason{}}
}

// note records the engine's latest reason for a pending workload.
func (p *pendingNotes) note(u admission.PendingUpdate, now time.Time) {
	if u.Reason == admission.ProvisioningBackoff {
		// The failed booking's status says why and until when, with the
		// autoscaler's words; the engine's reason adds nothing.
		return
	}
	if last, ok := p.written[u.Key]; ok && last == u.Reason {
		delete(p.notes, u.Key) // the reason on record still holds
		return
	}
	n, ok := p.notes[u.Key]
	if !ok {
		n.due = now.Add(p.delay) // pending with a reason since now
	}
	if actionable(u.Reason) {
		n.due = now
	}
	n.update = u
	p.notes[u.Key] = n
}

// take removes and returns the reasons due at now.
func (p *pendingNotes) take(now time.Time) []admission.PendingUpdate {
	var due []admission.PendingUpdate
	for k, n := range p.notes {
		if !n.due.After(now) {
			due = append(due, n.update)
			delete(p.notes, k)
		}
	}
	return due
}

// wrote records that a reason reached the workload's status.
func (p *pendingNotes) wrote(u admission.PendingUpdate) { p.written[u.Key] = u.Reason }

// forget drops a workload that is no longer pending.
func (p *pendingNotes) forget(key admission.WorkloadKey) {
	delete(p.notes, key)
	delete(p.written, key)
}
