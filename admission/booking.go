package admission

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Bookings: the policy of capacity bookings is the engine's, like every other
// decision. The caller reports what the autoscaler answered (ReportBooking); Cycle
// decides, from the answer, the flavor's policy and the time, whether a booking
// succeeded, failed (and when the next attempt may start, avoiding the domains that
// failed) or must evict a started gang, and returns the decisions in
// Result.Bookings. The caller writes them and confirms them by upserting the
// workload with the record it wrote (Workload.Booking), or calls Rollback.
//
// cluster-autoscaler never fails a best-effort-atomic-scale-up request it cannot
// satisfy: it answers Provisioned=False (CapacityIsNotFound) and retries on its own
// for days. So a booking whose answer stays "no capacity" for the flavor's
// CapacityNotFoundTimeout fails in its domain, and one that gets no answer at all
// for AnswerTimeout fails too; without those bounds a gang would hold its quota for
// one domain for good.

// BookingState is where a workload's latest booking stands.
type BookingState string

// The states of a booking. Every state but Pending and Provisioned is a failed
// attempt.
const (
	BookingPending          BookingState = "Pending"
	BookingProvisioned      BookingState = "Provisioned"
	BookingFailed           BookingState = "Failed"
	BookingCapacityNotFound BookingState = "CapacityNotFound"
	BookingNoAnswer         BookingState = "NoAnswer"
	BookingExpired          BookingState = "BookingExpired"
	BookingRevoked          BookingState = "CapacityRevoked"
	BookingPodsNotReady     BookingState = "PodsNotReady"
	BookingCancelled        BookingState = "Cancelled"
)

// Booking is a workload's booking record as the caller persists it: the latest
// attempt and what earlier ones taught. Times are unix nanoseconds, 0 when unset.
type Booking struct {
	// Attempt numbers the workload's bookings from 1.
	Attempt int32
	// Failures counts the attempts that failed in a row.
	Failures int32
	// State of the latest attempt.
	State BookingState
	// Flavor whose capacity the latest attempt books, and whose policy applies.
	Flavor string
	// Domain of the latest attempt; nil when unpinned.
	Domain *TopologyAssignment
	// CapacityNotFoundSince is when the autoscaler first answered "no capacity".
	CapacityNotFoundSince int64
	// RetryAfter is when the next attempt may start.
	RetryAfter int64
	// FailedDomains are the domains whose bookings failed, to avoid.
	FailedDomains []TopologyAssignment
	// GaveUp: no attempt is left; the workload must not be upserted pending.
	GaveUp bool
	// PodsReady: every pod of the gang started on the booking was Ready in time.
	PodsReady bool
}

// Answer is what the autoscaler said about a booking's request.
type Answer uint8

const (
	// AnswerNone means the request exists and has no answer yet (Since: its creation).
	AnswerNone Answer = iota
	// AnswerCapacityNotFound means no capacity now; the autoscaler retries (Since: first
	// seen).
	AnswerCapacityNotFound
	// AnswerProvisioned means the capacity is booked.
	AnswerProvisioned
	// AnswerFailed means the autoscaler gave the request up.
	AnswerFailed
	// AnswerExpired means the booking expired (Consumed: pods of the gang used it).
	AnswerExpired
	// AnswerRevoked means the autoscaler took the capacity back.
	AnswerRevoked
	// AnswerPodsNotReady means the gang started on the booking, and not every pod was
	// Ready in time.
	AnswerPodsNotReady
	// AnswerPodsCounted is the count of the started gang's Ready pods (Ready),
	// taken at its pods-ready deadline (Deadline): the engine decides whether
	// they all were Ready in time (BookingPodsReady) or the gang is evicted
	// (BookingPodsNotReady).
	AnswerPodsCounted
)

// BookingReport is one answer about one attempt.
type BookingReport struct {
	// Attempt the answer is about; answers about other attempts are ignored.
	Attempt int32
	// Answer is what was said.
	Answer Answer
	// Since qualifies AnswerNone and AnswerCapacityNotFound (unix nanoseconds).
	Since int64
	// Consumed qualifies AnswerExpired.
	Consumed bool
	// Ready, Deadline (unix nanoseconds) and ReadySeconds (the flavor's
	// podsReadySeconds) qualify AnswerPodsCounted.
	Ready        int32
	Deadline     int64
	ReadySeconds int64
	// Message is the autoscaler's words.
	Message string
}

// BookingAction is what a booking decision does.
type BookingAction uint8

const (
	// BookingStart means the capacity is provisioned; the gang may start.
	BookingStart BookingAction = iota + 1
	// BookingRetry means the attempt failed before the gang started; its quota is
	// released and the workload waits for RetryAfter (or gave up).
	BookingRetry
	// BookingEvict means the booking of a started gang failed; the gang is evicted and
	// requeued after RetryAfter (or gave up).
	BookingEvict
	// BookingPodsReady means every pod of the started gang was Ready by its
	// deadline: the booking proved good (its failures in a row start again from 0)
	// and is not checked again for this admission.
	BookingPodsReady
)

// BookingDecision is one decision about a booking, for the caller to write.
type BookingDecision struct {
	// Key of the workload.
	Key WorkloadKey
	// Action to carry out.
	Action BookingAction
	// Attempt decided about.
	Attempt int32
	// State the attempt ends in (BookingProvisioned for BookingStart).
	State BookingState
	// Failures in a row after this decision, FailedDomains the whole list to
	// avoid, RetryAfter the earliest next attempt (0 with GaveUp).
	Failures      int32
	FailedDomains []TopologyAssignment
	RetryAfter    int64
	GaveUp        bool
	// MaxAttempts is the flavor's, for messages.
	MaxAttempts int32
	// Detail says what happened, with the autoscaler's words.
	Detail string
	// Topology, for a BookingStart of a gang that awaited its new node, is
	// the domain with the node it is pinned to, to write into the admission.
	Topology *TopologyAssignment `json:",omitempty"`
}

// booking is w's booking record, or an empty one.
func (w *wl) booking() Booking {
	if w.bk == nil {
		return Booking{}
	}
	return *w.bk
}

// ReportBooking records what the autoscaler answered about a workload's booking.
// The answer is acted on in the next Cycle; a later report for the same attempt
// replaces it. Reports may come before the workload is upserted.
func (e *Engine) ReportBooking(key WorkloadKey, r BookingReport) {
	reports := e.books.reports
	if r.Answer == AnswerPodsCounted {
		reports = e.books.counts
	}
	if old, ok := reports[key]; ok && old == r {
		return
	}
	reports[key] = r
	e.books.bookingDirty[key] = struct{}{}
}

// NextWake is the earliest time (unix nanoseconds) at which a time-based booking
// rule may decide something without any new input — a bound elapsing, a failed
// booking's backoff ending — or 0 when none is pending. The caller runs a Cycle
// then; the bounds are kept to the second only if it does.
func (e *Engine) NextWake() int64 {
	next := e.books.bookingDue
	for _, w := range e.books.backoffs {
		if w.notBefore > 0 && (next == 0 || w.notBefore < next) {
			next = w.notBefore
		}
	}
	return next
}

// policyOf is the provisioning policy of a flavor.
func (topo *topology) policyOf(flavor string) ProvisioningPolicy {
	if tf, ok := topo.flavorTopo[flavor]; ok {
		return tf.policy
	}
	return ProvisioningPolicy{}
}

// decideBookings turns answers and elapsed bounds into decisions, in key order.
//
// Only the workloads whose answer or record changed are looked at, unless a
// bound elapsed: then every booking is, and the next bound is found again.
// A workload nothing happened to has nothing new to decide before its next
// bound; looking at every booking on every answer made a cycle cost as many
// steps as there are bookings.
func (books *bookings) decideBookings(res *Result) {
	elapsed := books.bookingDue != 0 && books.clock.now >= books.bookingDue
	if len(books.bookingDirty) == 0 && !elapsed {
		return
	}
	var keys []WorkloadKey
	if elapsed {
		books.bookingDue = 0
		keys = slices.Collect(maps.Keys(books.reports))
		keys = slices.AppendSeq(keys, maps.Keys(books.counts))
		for w := range books.booking {
			keys = append(keys, w.key) // a booking without an answer yet
		}
	} else {
		for k := range books.bookingDirty {
			if _, ok := books.reports[k]; ok || books.inFlight(k) || books.counted(k) {
				keys = append(keys, k)
			}
		}
	}
	clear(books.bookingDirty)
	slices.SortFunc(keys, cmpKey)
	keys = slices.Compact(keys)
	for _, k := range keys {
		w, ok := books.workloads[k]
		if !ok || w.phase != phaseAdmitted || w.deciding != 0 || w.evicting || w.evictedAs != "" || w.bk == nil {
			continue
		}
		r, reported := books.reports[k]
		if reported && r.Attempt != w.bk.Attempt {
			reported = false
		}
		if d, ok := books.decide(w, r, reported); ok {
			w.deciding = d.Action
			if d.Action == BookingEvict {
				w.evicting = true
			}
			res.Bookings = append(res.Bookings, d)
		}
	}
}

func cmpKey(a, b WorkloadKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// decide is the decision for one admitted workload with a booking, if any is due.
func (books *bookings) decide(w *wl, r BookingReport, reported bool) (BookingDecision, bool) {
	pol := books.topo.policyOf(w.bk.Flavor)
	if _, inFlight := books.booking[w]; inFlight {
		if !reported {
			return BookingDecision{}, false // no request yet, or no API: nothing to time
		}
		switch r.Answer {
		case AnswerProvisioned:
			pinned, wait := books.pinOnStart(w)
			if wait {
				return BookingDecision{}, false
			}
			var failures int32 // the booking is good: see ChecksPodsReady
			if pol.ChecksPodsReady {
				failures = w.bk.Failures
			}
			return BookingDecision{Key: w.key, Action: BookingStart, Attempt: w.bk.Attempt, State: BookingProvisioned,
				Failures: failures, MaxAttempts: pol.maxAttempts(), Detail: r.Message, Topology: pinned}, true
		case AnswerFailed:
			return books.fail(w, pol, BookingRetry, BookingFailed, "failed: "+orNone(r.Message)), true
		case AnswerExpired:
			return books.fail(w, pol, BookingRetry, BookingExpired, "expired before the gang started: "+orNone(r.Message)), true
		case AnswerRevoked:
			return books.fail(w, pol, BookingRetry, BookingRevoked, "was revoked before the gang started: "+orNone(r.Message)), true
		case AnswerCapacityNotFound:
			since := cmp.Or(r.Since, w.bk.CapacityNotFoundSince, books.clock.now)
			bound := cmp.Or(pol.CapacityNotFoundTimeout, DefaultCapacityNotFoundTimeout)
			if books.due(since + int64(bound)) {
				return books.fail(w, pol, BookingRetry, BookingCapacityNotFound,
					fmt.Sprintf("found no capacity for %s (capacityNotFoundSeconds %d): %s", time.Duration(books.clock.now-since).Round(time.Second),
						int64(bound/time.Second), orNone(r.Message))), true
			}
		case AnswerNone:
			bound := cmp.Or(pol.AnswerTimeout, DefaultAnswerTimeout)
			if books.due(cmp.Or(r.Since, books.clock.now) + int64(bound)) {
				return books.fail(w, pol, BookingRetry, BookingNoAnswer,
					fmt.Sprintf("got no answer from the autoscaler within %s (answerTimeoutSeconds %d): is cluster-autoscaler running with ProvisioningRequests enabled, and does it serve this class?",
						bound, int64(bound/time.Second))), true
			}
		}
		return BookingDecision{}, false
	}
	if w.bk.State != BookingProvisioned {
		return BookingDecision{}, false
	}
	if reported {
		if d, ok := books.decideStarted(w, pol, r); ok {
			return d, true
		}
	}
	if c, ok := books.counts[w.key]; ok && c.Attempt == w.bk.Attempt {
		return books.podsCounted(w, pol, c)
	}
	return BookingDecision{}, false
}

// decideStarted is the decision an answer about the booking of a started gang
// calls for, if any.
func (books *bookings) decideStarted(w *wl, pol ProvisioningPolicy, r BookingReport) (BookingDecision, bool) {
	switch r.Answer {
	case AnswerRevoked:
		return books.fail(w, pol, BookingEvict, BookingRevoked, "was revoked after the gang started: "+orNone(r.Message)), true
	case AnswerPodsNotReady:
		if w.bk.PodsReady {
			return BookingDecision{}, false // a late report: the pods were Ready in time after all
		}
		return books.fail(w, pol, BookingEvict, BookingPodsNotReady, "started, but "+r.Message), true
	case AnswerExpired:
		if !r.Consumed {
			return books.fail(w, pol, BookingEvict, BookingExpired, "expired before any pod of the started gang used it: "+orNone(r.Message)), true
		}
		books.settleBooked(w) // the autoscaler holds nothing for it any more
	}
	return BookingDecision{}, false
}

// due reports whether deadline has passed, and otherwise keeps it as the next
// time decideBookings must look again.
func (books *bookings) due(deadline int64) bool {
	if books.clock.now >= deadline {
		return true
	}
	if books.bookingDue == 0 || deadline < books.bookingDue {
		books.bookingDue = deadline
	}
	return false
}

// fail decides a failed attempt: one more failure in a row, its domain avoided, and
// the next attempt after the backoff, or none.
func (books *bookings) fail(w *wl, pol ProvisioningPolicy, action BookingAction, state BookingState, detail string) BookingDecision {
	bk := w.bk
	d := BookingDecision{Key: w.key, Action: action, Attempt: bk.Attempt, State: state, Failures: bk.Failures + 1,
		FailedDomains: addFailedDomain(bk.FailedDomains, bk.Domain), MaxAttempts: pol.maxAttempts(), Detail: detail}
	if d.Failures >= d.MaxAttempts {
		d.GaveUp = true
	} else {
		d.RetryAfter = books.clock.now + int64(pol.backoff(d.Failures))
	}
	return d
}

// addFailedDomain appends d unless it is nil or listed; the oldest entries go when
// the list is full.
func addFailedDomain(list []TopologyAssignment, d *TopologyAssignment) []TopologyAssignment {
	out := make([]TopologyAssignment, 0, len(list)+1)
	for _, x := range list {
		out = append(out, cloneAssignment(x))
	}
	if d == nil || slices.ContainsFunc(list, func(x TopologyAssignment) bool { return sameAssignment(&x, d) }) {
		return out
	}
	out = append(out, cloneAssignment(*d))
	if len(out) > maxFailedDomains {
		out = out[len(out)-maxFailedDomains:]
	}
	return out
}

func cloneAssignment(a TopologyAssignment) TopologyAssignment {
	a.Levels, a.Domain = slices.Clone(a.Levels), slices.Clone(a.Domain)
	return a
}

// confirmBooking takes the record of an upsert of an admitted workload; a record
// that shows the decision in flight (if any) confirms it.
func (books *bookings) confirmBooking(w *wl, bk *Booking) {
	w.bk = bk
	switch w.deciding {
	case BookingStart:
		if bk != nil && bk.State == BookingProvisioned {
			w.deciding = 0
		}
	case BookingEvict:
		if bk != nil && bk.State != BookingProvisioned {
			w.deciding = 0
		}
	case BookingPodsReady:
		if bk == nil || bk.PodsReady || bk.State != BookingProvisioned {
			w.deciding = 0
		}
	}
	books.trackBooking(w)
}

// trackBooking files an admitted workload by its booking: in flight (e.books.booking), or
// provisioned with new nodes still reserved until they exist (e.books.awaiting).
func (books *bookings) trackBooking(w *wl) {
	inFlight := w.adm != nil && w.adm.Provisioning != nil && (w.bk == nil || w.bk.State == BookingPending)
	if inFlight {
		books.booking[w] = struct{}{}
	} else {
		delete(books.booking, w)
	}
	if w.bk != nil || inFlight {
		books.bookingDirty[w.key] = struct{}{} // a record to act on, maybe
	}
	if !inFlight && w.placed != nil && len(w.placed.newNodes) > 0 {
		books.awaiting[w] = struct{}{}
		books.settleBooked(w)
		return
	}
	delete(books.awaiting, w)
}

// keepsNewNodes reports whether the new nodes planned for w stay reserved in their
// pools: while the booking is in flight, and once provisioned until the nodes exist
// — cluster-autoscaler answers Provisioned when it has asked the cloud for the
// nodes, not when they joined — unless the booking expired or the gang's pods were
// all Ready, when the autoscaler holds nothing for it any more.
func (books *bookings) keepsNewNodes(w *wl) bool {
	if w.adm == nil || w.adm.Provisioning == nil || len(w.adm.Provisioning.NewNodes) == 0 {
		return false
	}
	if w.bk == nil || w.bk.State == BookingPending {
		return true
	}
	if w.bk.State != BookingProvisioned || w.bk.PodsReady {
		return false
	}
	r, ok := books.reports[w.key]
	return !ok || r.Attempt != w.bk.Attempt || r.Answer != AnswerExpired
}

// settleBooked re-plans a provisioned gang's reservation once its new nodes need
// no longer be held in their pools: the nodes exist (its domain's nodes hold it),
// or the autoscaler holds nothing for it any more (keepsNewNodes).
func (books *bookings) settleBooked(w *wl) {
	if w.evicting {
		// Leaving: its reservation stays as it is until it goes, for a
		// preemptor may count on it (preempt_hold.go).
		return
	}
	if w.placed == nil || len(w.placed.newNodes) == 0 {
		delete(books.awaiting, w)
		return
	}
	books.topo.reserve(w.placed, -1)
	w.placed = books.topo.planOnNodes(w, books.keepsNewNodes(w))
	books.topo.reserve(w.placed, 1)
	if w.placed == nil || len(w.placed.newNodes) == 0 {
		delete(books.awaiting, w)
		books.topo.freed = true
	}
}

// settleAwaiting tries every provisioned gang still waiting for its new nodes,
// and has the bookings of gangs waiting for their one new node decided again.
func (books *bookings) settleAwaiting() {
	if len(books.pinning) > 0 {
		books.wakePinning()
	}
	if len(books.awaiting) == 0 {
		return
	}
	ws := slices.SortedFunc(maps.Keys(books.awaiting), func(a, b *wl) int { return cmpKey(a.key, b.key) })
	for _, w := range ws {
		books.settleBooked(w)
	}
}

// bookingPlan is the plan of a new booking for w on flavor, after its earlier
// attempts.
func (books *bookings) bookingPlan(w *wl, flavor string, p *placement) *ProvisioningPlan {
	plan := planOf(p)
	if plan == nil {
		return nil
	}
	plan.Flavor = flavor
	plan.Attempt = w.booking().Attempt + 1
	plan.MaxAttempts = books.topo.policyOf(flavor).maxAttempts()
	return plan
}

func orNone(s string) string {
	if s == "" {
		return "no message from the autoscaler"
	}
	return s
}

// cloneBooking deep-copies a record.
func cloneBooking(b Booking) Booking {
	if b.Domain != nil {
		d := cloneAssignment(*b.Domain)
		b.Domain = &d
	}
	if b.FailedDomains != nil {
		b.FailedDomains = addFailedDomain(b.FailedDomains, nil)
	}
	return b
}

// sameRecord reports whether two records are equal.
func sameRecord(a, b *Booking) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	if a == nil {
		return true
	}
	return a.Attempt == b.Attempt && a.Failures == b.Failures && a.State == b.State && a.Flavor == b.Flavor &&
		sameAssignment(a.Domain, b.Domain) && a.CapacityNotFoundSince == b.CapacityNotFoundSince &&
		a.RetryAfter == b.RetryAfter && a.GaveUp == b.GaveUp && a.PodsReady == b.PodsReady &&
		slices.EqualFunc(a.FailedDomains, b.FailedDomains, func(x, y TopologyAssignment) bool { return sameAssignment(&x, &y) })
}

// counted reports whether the Ready pods of the workload's gang were counted.
func (books *bookings) counted(k WorkloadKey) bool {
	_, ok := books.counts[k]
	return ok
}

// podsCounted decides, at a started gang's pods-ready deadline, whether all its
// pods were Ready in time: the booking proved good, or the gang is evicted.
func (books *bookings) podsCounted(w *wl, pol ProvisioningPolicy, r BookingReport) (BookingDecision, bool) {
	if w.bk.PodsReady || !books.due(r.Deadline) {
		return BookingDecision{}, false
	}
	var total int32
	for _, ps := range w.podSets {
		total += ps.count
	}
	if r.Ready >= total {
		return BookingDecision{Key: w.key, Action: BookingPodsReady, Attempt: w.bk.Attempt, State: BookingProvisioned,
			MaxAttempts: pol.maxAttempts(), Detail: fmt.Sprintf("all %d pods were Ready in time", total)}, true
	}
	return books.fail(w, pol, BookingEvict, BookingPodsNotReady, fmt.Sprintf("started, but %d of %d pods were Ready %s after admission (podsReadySeconds %d)",
		r.Ready, total, time.Duration(r.ReadySeconds)*time.Second, r.ReadySeconds)), true
}
