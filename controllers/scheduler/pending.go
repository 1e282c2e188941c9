package scheduler

import (
	"time"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// actionable reports whether a pending reason needs someone to act — the
// queue setup or the workload is wrong, or no domain could ever hold the
// gang — as opposed to the workload just waiting its turn.
func actionable(r admission.PendingReason) bool {
	switch r {
	case admission.ClusterQueueNotFound, admission.ClusterQueueStopped, admission.FlavorNotFound, admission.UnsupportedResource,
		admission.ExceedsMaxQuota, admission.NoMatchingFlavor, admission.UnknownTopologyLevel, admission.ExceedsDomainCapacity:
		return true
	}
	return r.Unqueueable()
}

// capacityWait reports whether a pending update says that quota fits and
// the gang waits for capacity on a flavor that books it, yet is not booked:
// neither the flavor's nodes nor its CapacityPools take the gang now (the
// pools are at maxNodes, or none creates a node that holds a gang that must
// fit one node). Its owner expects the autoscaler to be asked and sees no
// ProvisioningRequest, and no turn in the queue will change that, so it is
// written at once — once per stay in the queue, not again when the gang
// waits for quota meanwhile and for capacity again. A gang waiting for the
// nodes of a flavor that never books waits for running gangs to end, as
// for a turn in the queue, and is not written (gpu-gangs, docs/performance.md,
// has hundreds).
func capacityWait(u admission.PendingUpdate) bool {
	return u.Reason == admission.TopologyUnavailable && u.BookingFlavor
}

// outdated reports whether a reason on record in a Workload's status asks
// someone to act — an engine reason that is actionable, or an invalid spec
// the scheduler reported — so that it must be replaced as soon
// as the workload merely waits: a status telling its owner to fix what is
// no longer broken is worse than none.
func outdated(r admission.PendingReason) bool {
	switch berthv1.WorkloadReason(r) {
	case berthv1.ReasonLocalQueueNotFound, berthv1.ReasonLocalQueueStopped, berthv1.ReasonDeactivated,
		berthv1.ReasonNamespaceNotAllowed, berthv1.ReasonInvalidSpec:
		return true
	}
	return actionable(r)
}

// pendingNotes decide when a pending reason is written to a Workload's
// status. Writes are the API server's scarce resource, and in a deep
// backlog almost every workload is pending for a while, so:
//
//   - an actionable reason is written at once, and so is a wait for
//     capacity the autoscaler is not asked for (capacityWait), without a
//     warning event;
//   - a waiting reason (insufficient quota, behind the head, waiting for
//     preemption) is not written at all with no delay set — the visibility
//     API, kubectl berth explain and the queue metrics carry it — or only
//     after the workload stayed pending for the delay, when most workloads
//     are admitted sooner and never cost the write;
//   - a waiting reason replaces an outdated actionable one at once;
//   - a reason is written again only when it changes, not when only the
//     message's figures do.
//
// Callers hold the Scheduler's mutex.
type pendingNotes struct {
	// delay is how long a workload waits before its waiting reason is
	// written; zero never writes one.
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
	last, recorded := p.written[u.Key]
	// Why a workload cannot be queued names what to fix (which LocalQueue,
	// which stopPolicy): its message is written whenever it changes.
	if recorded && last == u.Reason && !u.Reason.Unqueueable() {
		delete(p.notes, u.Key) // the reason on record still holds
		return
	}
	replaces := recorded && outdated(last)
	if p.delay == 0 && !actionable(u.Reason) && !replaces && !capacityWait(u) {
		delete(p.notes, u.Key) // waiting reasons are served, not written
		return
	}
	n, ok := p.notes[u.Key]
	if !ok {
		n.due = now.Add(p.delay) // pending with a reason since now
	}
	if actionable(u.Reason) || replaces || capacityWait(u) {
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

// recorded learns the reason a pending workload's status already carries —
// after a restart, or when another controller wrote it — unless a reason
// of this scheduler's is on record, which is newer than any cached copy.
func (p *pendingNotes) recorded(key admission.WorkloadKey, r berthv1.WorkloadReason) {
	if _, ok := p.written[key]; !ok && r != "" {
		p.written[key] = lifecycle.EngineReason(r)
	}
}

// wrote records that a reason reached the workload's status.
func (p *pendingNotes) wrote(u admission.PendingUpdate) { p.written[u.Key] = u.Reason }

// forget drops a workload that is no longer pending.
func (p *pendingNotes) forget(key admission.WorkloadKey) {
	delete(p.notes, key)
	delete(p.written, key)
}
