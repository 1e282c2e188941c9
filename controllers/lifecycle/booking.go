package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// maxNameLength is the longest object name (a DNS subdomain).
const maxNameLength = 253

// RequestName is the name of a workload's ProvisioningRequest for one
// booking attempt: "<workload>-<attempt>", shortened with a hash when too
// long. Attempts are numbered for the workload's whole life, so a new
// attempt never collides with an old request still being deleted.
func RequestName(workload string, attempt int32) string {
	return ShortName(fmt.Sprintf("%s-%d", workload, attempt))
}

// ShortName returns name, or, when it is longer than an object name may
// be, a prefix of it and a hash of the whole.
func ShortName(name string) string {
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:maxNameLength-11] + "-" + hex.EncodeToString(sum[:])[:10]
}

// DomainString names a topology domain for messages: "rack=r1" or
// "zone=z1,rack=r1"; "any domain" when unpinned; a node still to be
// created is "(a new node)".
func DomainString(t *berthv1.TopologyAssignment) string {
	if t == nil || len(t.Levels) == 0 {
		return "any domain"
	}
	parts := make([]string, 0, len(t.Levels))
	for i, l := range t.Levels {
		switch {
		case i >= len(t.Values):
		case t.Values[i] == "":
			parts = append(parts, l+"=(a new node)") // named once it joins
		default:
			parts = append(parts, l+"="+t.Values[i])
		}
	}
	return strings.Join(parts, ",")
}

// NewNodePool is the CapacityPool of the one new node a gang that must fit
// one node is booked on ("" for any other admission). Its request is pinned
// to that pool, whose nodes carry berth.dev/capacity-pool: the engine chose
// the pool whose one node holds every pod of the gang, and the autoscaler,
// given the rack alone, could grow another node group of the rack, whose
// smaller nodes would hold the pods only two by two. Given the pool, it
// packs the request's pods onto the fewest nodes of that group — one — and
// the gang is pinned to that node once it joined (lifecycle.Provision).
func NewNodePool(a *berthv1.Admission) string {
	if !a.Topology.AwaitsNode() || a.Provisioning == nil || len(a.Provisioning.NewNodes) != 1 {
		return ""
	}
	return a.Provisioning.NewNodes[0].Pool
}

// unpinnedNote ends the messages of a booking that names no domain.
const unpinnedNote = "; unpinned: the request names no topology domain (the gang requires none, or its flavor has no CapacityPool), so the autoscaler chooses where the nodes go"

// Reserve gives a pending workload an admission whose capacity is booked
// first: quota is reserved, the gang may not start yet, and the attempt's
// booking is recorded — the failures and failed domains of earlier
// attempts carry over.
type Reserve struct {
	// Admission is the quota reserved; its Provisioning names the class.
	Admission *berthv1.Admission
	// Generation of the spec the admission was decided for.
	Generation int64
	// Attempt numbers the booking; it must be above the last one recorded.
	Attempt int32
	// Flavor whose capacity is booked.
	Flavor string
	// MaxAttempts is the flavor's, for the message.
	MaxAttempts int32
	// Message describes the quota reserved.
	Message string
}

// Name implements Transition.
func (Reserve) Name() string  { return "Reserve" }
func (Reserve) from() []Phase { return []Phase{Pending} }
func (t Reserve) apply(wl *berthv1.Workload, now metav1.Time) error {
	if err := decidedFor(t, wl, t.Generation); err != nil {
		return err
	}
	if t.Admission == nil || t.Admission.Provisioning == nil {
		return refuse(t, wl, "the admission books no capacity")
	}
	prev := wl.Status.Provisioning
	if prev != nil && t.Attempt <= prev.Attempt {
		return refuse(t, wl, "attempt %d is not after attempt %d", t.Attempt, prev.Attempt)
	}
	next := &berthv1.ProvisioningStatus{
		Attempt: t.Attempt, RequestName: RequestName(wl.Name, t.Attempt), ClassName: t.Admission.Provisioning.ClassName,
		Flavor: t.Flavor, State: berthv1.ProvisioningPending, Topology: t.Admission.Topology.DeepCopy(), StartTime: &now,
	}
	if prev != nil && !prev.GaveUp {
		next.Failures, next.FailedDomains = prev.Failures, prev.FailedDomains
	}
	next.Message = fmt.Sprintf("booking capacity with ProvisioningRequest %s (%s) in %s, attempt %d (%d of %d failed so far)",
		next.RequestName, next.ClassName, DomainString(next.Topology), next.Attempt, next.Failures, t.MaxAttempts)
	if next.Topology == nil {
		next.Message += unpinnedNote
	}
	wl.Status.Admission = t.Admission.DeepCopy()
	wl.Status.Provisioning = next
	set(wl, berthv1.ConditionQuotaReserved, metav1.ConditionTrue, berthv1.ReasonQuotaReserved, t.Message, now)
	removePodsReady(wl)
	clearEviction(wl, berthv1.ReasonWaitingForCapacity, "admitted again after eviction, waiting for capacity", now)
	derive(wl, why{berthv1.ReasonWaitingForCapacity, next.Message}, now)
	return nil
}

// NoteBooking records the autoscaler's answer to a booking that is not
// decided yet: what it said and, the first time it found no capacity,
// since when.
type NoteBooking struct {
	// Attempt the answer is for.
	Attempt int32
	// CapacityNotFoundSince, when set, is when the autoscaler first
	// answered that it found no capacity; a time already recorded stays.
	CapacityNotFoundSince *metav1.Time
	// Message says what the booking waits for.
	Message string
}

// Name implements Transition.
func (NoteBooking) Name() string  { return "NoteBooking" }
func (NoteBooking) from() []Phase { return []Phase{Reserved} }
func (t NoteBooking) apply(wl *berthv1.Workload, now metav1.Time) error {
	p := wl.Status.Provisioning
	if p.Attempt != t.Attempt {
		return refuse(t, wl, "the answer is for attempt %d, the booking is attempt %d", t.Attempt, p.Attempt)
	}
	if t.CapacityNotFoundSince != nil && p.CapacityNotFoundSince == nil {
		p.CapacityNotFoundSince = t.CapacityNotFoundSince.DeepCopy()
	}
	p.Message = t.Message
	if p.Topology == nil {
		p.Message += unpinnedNote
	}
	p.Message = truncate(p.Message)
	derive(wl, why{berthv1.ReasonWaitingForCapacity, p.Message}, now)
	return nil
}

// Provision lets a workload whose capacity is provisioned start. The
// admission keeps what it booked, so the new nodes stay reserved until
// they exist.
type Provision struct {
	// Attempt that was provisioned.
	Attempt int32
	// Failures in a row from now on, as the engine decided: 0, unless only
	// pods Ready in time prove the booking good (PodsReady resets them).
	Failures int32
	// Detail is the autoscaler's words.
	Detail string
	// Pin, for a gang that must fit one node booked on a new one (its
	// admission's topology awaits the node), is that domain with the node
	// that joined and holds the gang: it becomes the admission's topology,
	// so the gang's pods are released pinned to the node by hostname.
	Pin *berthv1.TopologyAssignment
}

// Name implements Transition.
func (Provision) Name() string  { return "Provision" }
func (Provision) from() []Phase { return []Phase{Reserved} }
func (t Provision) apply(wl *berthv1.Workload, now metav1.Time) error {
	p := wl.Status.Provisioning
	if p.Attempt != t.Attempt {
		return refuse(t, wl, "provisioned attempt %d, the booking is attempt %d", t.Attempt, p.Attempt)
	}
	where := DomainString(p.Topology)
	if err := t.pin(wl); err != nil {
		return err
	}
	if t.Pin != nil {
		where = DomainString(t.Pin)
	}
	msg := fmt.Sprintf("capacity provisioned by %s (%s) in %s: %s", p.RequestName, p.ClassName, where, orNone(t.Detail))
	p.State, p.Message, p.Failures = berthv1.ProvisioningProvisioned, truncate(msg), t.Failures
	p.RetryAfter, p.CapacityNotFoundSince = nil, nil
	clearEviction(wl, berthv1.ReasonAdmitted, "admitted again after eviction", now)
	derive(wl, why{berthv1.ReasonAdmitted, msg}, now)
	return nil
}

// pin writes the node a gang that awaited its new node is pinned to into
// its admission. The pin must name the same flavor and levels, and the
// same values but the node's, which only the pin may set; and a gang must
// await its node to be pinned, and be pinned to start.
func (t Provision) pin(wl *berthv1.Workload) error {
	a := wl.Status.Admission.Topology
	switch {
	case t.Pin == nil && a.AwaitsNode():
		return refuse(t, wl, "the gang must fit one node still to be created, and the start names none")
	case t.Pin == nil:
		return nil
	case !a.AwaitsNode() || t.Pin.AwaitsNode():
		return refuse(t, wl, "the pin %s is not the node of a domain that awaits one", DomainString(t.Pin))
	case t.Pin.Flavor != a.Flavor || !slices.Equal(t.Pin.Levels, a.Levels) || len(t.Pin.Values) != len(a.Values) ||
		!slices.Equal(t.Pin.Values[:len(a.Values)-1], a.Values[:len(a.Values)-1]):
		return refuse(t, wl, "the pin %s is outside the booked domain %s", DomainString(t.Pin), DomainString(a))
	}
	wl.Status.Admission.Topology = t.Pin.DeepCopy()
	return nil
}

// BookingFailure is a failed booking as the admission engine decided it:
// what failed, how many attempts failed in a row now, the domains to avoid,
// and when the next attempt may start — or that there is none.
type BookingFailure struct {
	// Attempt that failed.
	Attempt int32
	// State is the failed attempt's state.
	State berthv1.ProvisioningState
	// Failures in a row, this one included.
	Failures int32
	// MaxAttempts is the flavor's, for the message.
	MaxAttempts int32
	// FailedDomains is the whole list of domains to avoid.
	FailedDomains []berthv1.TopologyAssignment
	// RetryAfter is when the next attempt may start; nil when GaveUp.
	RetryAfter *metav1.Time
	// GaveUp: no attempt is left.
	GaveUp bool
	// Detail says what happened, in the autoscaler's words where it gave
	// any.
	Detail string
}

// record writes the failure into the workload's provisioning status and
// returns the message.
func (f *BookingFailure) record(t Transition, wl *berthv1.Workload) error {
	p := wl.Status.Provisioning
	if p == nil || p.Attempt != f.Attempt {
		return refuse(t, wl, "the failure is for attempt %d, the booking is another", f.Attempt)
	}
	p.State, p.Failures, p.GaveUp = f.State, f.Failures, f.GaveUp
	p.FailedDomains = append([]berthv1.TopologyAssignment(nil), f.FailedDomains...)
	p.RetryAfter = f.RetryAfter.DeepCopy()
	if f.GaveUp {
		p.RetryAfter = nil
	}
	msg := fmt.Sprintf("%s booking %s in %s %s; %d of %d attempts failed in a row", p.ClassName, p.RequestName,
		DomainString(p.Topology), orNone(f.Detail), f.Failures, f.MaxAttempts)
	switch {
	case f.GaveUp:
		msg += fmt.Sprintf("; no attempt left: delete Workload %s to start over (the job's controller creates a new one), or change the flavor's provisioning policy or capacity first", wl.Name)
	case p.RetryAfter != nil:
		msg += "; next attempt not before " + p.RetryAfter.UTC().Format(time.RFC3339)
	}
	p.Message = truncate(msg)
	return nil
}

// FailBooking releases the quota of a workload whose booking failed before
// its gang started: it waits for the retry time (or, when no attempt is
// left, gives up).
type FailBooking struct {
	// Failure is what failed and what follows.
	Failure BookingFailure
}

// Name implements Transition.
func (FailBooking) Name() string  { return "FailBooking" }
func (FailBooking) from() []Phase { return []Phase{Reserved} }
func (t FailBooking) apply(wl *berthv1.Workload, now metav1.Time) error {
	if err := t.Failure.record(t, wl); err != nil {
		return err
	}
	wl.Status.Admission = nil
	reason := berthv1.ReasonProvisioningFailed
	if t.Failure.GaveUp {
		reason = berthv1.ReasonProvisioningGaveUp
	}
	derive(wl, why{reason, wl.Status.Provisioning.Message}, now)
	return nil
}

// PodsReady records that every pod of a gang admitted on booked capacity
// was Ready in time; the gang is not checked again for this admission, and
// its booking proved good: the failures in a row start again from 0.
type PodsReady struct {
	// Total pods of the gang.
	Total int32
}

// Name implements Transition.
func (PodsReady) Name() string  { return "PodsReady" }
func (PodsReady) from() []Phase { return []Phase{Admitted} }
func (t PodsReady) apply(wl *berthv1.Workload, now metav1.Time) error {
	set(wl, berthv1.ConditionPodsReady, metav1.ConditionTrue, berthv1.ReasonPodsReady, fmt.Sprintf("all %d pods were Ready in time", t.Total), now)
	if p := wl.Status.Provisioning; p != nil {
		p.Failures = 0
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no message from the autoscaler"
	}
	return s
}
