package scheduler

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestPendingNotes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := admission.WorkloadKey{Namespace: "ns", Name: "w"}
	waiting := admission.PendingUpdate{Key: key, Reason: admission.InsufficientQuota, Message: "short by 8"}
	cases := []struct {
		name  string
		delay time.Duration
		steps func(p *pendingNotes) []admission.PendingUpdate
		want  int
	}{
		{name: "a waiting reason is not written before the delay", delay: time.Minute, want: 0, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(waiting, t0)
			return p.take(t0.Add(59 * time.Second))
		}},
		{name: "a waiting reason is written after the delay", delay: time.Minute, want: 1, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(waiting, t0)
			p.note(admission.PendingUpdate{Key: key, Reason: admission.InsufficientQuota, Message: "short by 4"}, t0.Add(30*time.Second))
			return p.take(t0.Add(time.Minute))
		}},
		{name: "an actionable reason is written at once", delay: time.Minute, want: 1, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(admission.PendingUpdate{Key: key, Reason: admission.ExceedsMaxQuota}, t0)
			return p.take(t0)
		}},
		{name: "an admitted workload is never written", delay: time.Minute, want: 0, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(waiting, t0)
			p.forget(key)
			return p.take(t0.Add(time.Hour))
		}},
		{name: "the same reason with new figures is not rewritten", delay: time.Minute, want: 0, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(waiting, t0)
			for _, u := range p.take(t0.Add(time.Minute)) {
				p.wrote(u)
			}
			p.note(admission.PendingUpdate{Key: key, Reason: admission.InsufficientQuota, Message: "short by 2"}, t0.Add(2*time.Minute))
			return p.take(t0.Add(time.Hour))
		}},
		{name: "a new reason is written again", delay: time.Minute, want: 1, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(waiting, t0)
			for _, u := range p.take(t0.Add(time.Minute)) {
				p.wrote(u)
			}
			p.note(admission.PendingUpdate{Key: key, Reason: admission.ClusterQueueStopped}, t0.Add(2*time.Minute))
			return p.take(t0.Add(2 * time.Minute))
		}},
		{name: "with no delay a waiting reason is never written", want: 0, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(waiting, t0)
			p.note(admission.PendingUpdate{Key: key, Reason: admission.BlockedByHead}, t0.Add(time.Hour))
			return p.take(t0.Add(24 * time.Hour))
		}},
		{name: "with no delay an actionable reason is written at once", want: 1, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(admission.PendingUpdate{Key: key, Reason: admission.UnknownTopologyLevel}, t0)
			return p.take(t0)
		}},
		{name: "with no delay a gang waiting for capacity its flavor cannot book is written at once", want: 1, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(admission.PendingUpdate{Key: key, Reason: admission.TopologyUnavailable, Message: "no pool's node holds the gang", BookingFlavor: true}, t0)
			return p.take(t0)
		}},
		{name: "with no delay a gang waiting for the nodes of a flavor that never books is not written", want: 0, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(admission.PendingUpdate{Key: key, Reason: admission.TopologyUnavailable, Message: "no rack has room"}, t0)
			return p.take(t0.Add(time.Hour))
		}},
		{name: "a wait for capacity is written once while the workload stays pending", want: 0, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(admission.PendingUpdate{Key: key, Reason: admission.TopologyUnavailable, BookingFlavor: true}, t0)
			for _, u := range p.take(t0) {
				p.wrote(u)
			}
			p.note(waiting, t0.Add(time.Minute))
			p.note(admission.PendingUpdate{Key: key, Reason: admission.TopologyUnavailable, Message: "other figures", BookingFlavor: true}, t0.Add(2*time.Minute))
			return p.take(t0.Add(time.Hour))
		}},
		{name: "a waiting reason replaces an outdated actionable one at once", want: 1, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(admission.PendingUpdate{Key: key, Reason: admission.ClusterQueueStopped}, t0)
			for _, u := range p.take(t0) {
				p.wrote(u)
			}
			p.note(waiting, t0.Add(time.Minute))
			return p.take(t0.Add(time.Minute))
		}},
		{name: "a waiting reason replaces a missing LocalQueue found in status", want: 1, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.recorded(key, berthv1.ReasonLocalQueueNotFound)
			p.note(waiting, t0)
			return p.take(t0)
		}},
		{name: "a waiting reason found in status is left alone", want: 0, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.recorded(key, berthv1.ReasonPending)
			p.note(waiting, t0)
			return p.take(t0.Add(time.Hour))
		}},
		{name: "the status copy does not override the scheduler's own write", want: 0, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.note(admission.PendingUpdate{Key: key, Reason: admission.ExceedsMaxQuota}, t0)
			for _, u := range p.take(t0) {
				p.wrote(u)
			}
			p.recorded(key, berthv1.ReasonInsufficientQuota) // a cached copy older than the write
			p.note(admission.PendingUpdate{Key: key, Reason: admission.ExceedsMaxQuota}, t0.Add(time.Second))
			return p.take(t0.Add(time.Second))
		}},
		{name: "an actionable reason found in status is not written again", want: 0, delay: time.Minute, steps: func(p *pendingNotes) []admission.PendingUpdate {
			p.recorded(key, berthv1.ReasonExceedsMaxQuota)
			p.note(admission.PendingUpdate{Key: key, Reason: admission.ExceedsMaxQuota}, t0)
			return p.take(t0)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPendingNotes(tc.delay)
			if got := tc.steps(&p); len(got) != tc.want {
				t.Errorf("written %d reasons %v, want %d", len(got), got, tc.want)
			}
		})
	}
}

// TestTopologyReasonsActionable: a gang no domain can ever hold needs
// someone to act; one waiting for free capacity does not.
func TestTopologyReasonsActionable(t *testing.T) {
	if !actionable(admission.ExceedsDomainCapacity) || actionable(admission.TopologyUnavailable) {
		t.Errorf("a gang no domain can ever hold needs someone to act; one waiting for free capacity does not")
	}
}
