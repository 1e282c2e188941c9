package admission

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The fuzz harness's bookings: the autoscaler's answers are fuzz inputs, and
// the harness plays the controller writing (or failing to write) the engine's
// booking decisions.

// forget drops a workload from the model.
func (r *fuzzRun) forget(name string) {
	delete(r.m.specs, name)
	delete(r.m.phase, name)
	delete(r.m.adm, name)
	delete(r.m.bk, name)
}

// evicted upserts an admitted workload without its admission, as the
// controller does once an evicted job's pods are gone.
func (r *fuzzRun) evicted(name string) {
	delete(r.m.adm, name)
	r.m.phase[name] = phasePending
	r.upsert(r.object(name))
	if bk := r.m.bk[name]; bk != nil && bk.GaveUp {
		r.forget(name) // not queued again: the engine dropped it
	}
}

// answer reports an answer to both engines.
func (r *fuzzRun) answer(name string, rep BookingReport) {
	r.both(func(e *Engine) error { e.ReportBooking(key(name), rep); return nil })
}

// report sends a random answer about a random booking: pending or started,
// sometimes about another attempt.
func (r *fuzzRun) report() {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(r.m.adm)) {
		if a := r.m.adm[name]; a.Provisioning != nil && r.m.bk[name] != nil {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	name := names[r.s.n(len(names))]
	rep := BookingReport{Attempt: r.m.bk[name].Attempt, Message: "from the fuzzer"}
	if r.s.n(8) == 0 {
		rep.Attempt-- // an answer about an earlier attempt
	}
	rep.Answer = []Answer{AnswerNone, AnswerCapacityNotFound, AnswerProvisioned, AnswerProvisioned, AnswerFailed,
		AnswerExpired, AnswerRevoked, AnswerPodsNotReady}[r.s.n(8)]
	switch rep.Answer {
	case AnswerNone, AnswerCapacityNotFound:
		rep.Since = r.now.Add(-time.Duration(r.s.n(6)) * time.Minute).UnixNano()
	case AnswerExpired:
		rep.Consumed = r.s.n(2) == 0
	}
	r.answer(name, rep)
}

// applyBookings writes a cycle's booking decisions, leaves some in flight, or
// rolls them back, as the controller's writes succeed, hang or fail.
func (r *fuzzRun) applyBookings(res Result) {
	for _, d := range res.Bookings {
		if _, ok := r.m.specs[d.Key.Name]; !ok || r.m.phase[d.Key.Name] != phaseAdmitted {
			r.t.Fatalf("booking decision %+v about %s, not admitted in the model", d, d.Key)
		}
		switch r.s.n(4) {
		case 0:
			r.both(func(e *Engine) error { e.Rollback(d.Key); return nil })
		case 1: // not written yet
		default:
			r.confirmBooking(d)
		}
	}
}

// confirmBooking writes a decision into the model and upserts the workload
// with it, as the informer delivers the controller's write.
func (r *fuzzRun) confirmBooking(d BookingDecision) {
	name := d.Key.Name
	bk := r.m.bk[name]
	if bk == nil || bk.Attempt != d.Attempt {
		r.t.Fatalf("decision %+v about %s, whose record is %+v", d, name, bk)
	}
	next := cloneBooking(*bk)
	next.State = d.State
	switch d.Action {
	case BookingStart:
		next.Failures, next.CapacityNotFoundSince, next.RetryAfter = d.Failures, 0, 0
		if d.Topology != nil { // pinned to the node that joined: written into the admission
			adm := *r.m.adm[name]
			pin := cloneAssignment(*d.Topology)
			adm.Topology = &pin
			r.m.adm[name] = &adm
		}
	case BookingPodsReady: // the booking proved good
		next.Failures, next.PodsReady = 0, true
	default:
		next.Failures, next.FailedDomains, next.RetryAfter, next.GaveUp = d.Failures, d.FailedDomains, d.RetryAfter, d.GaveUp
	}
	r.m.bk[name] = &next
	if d.Action == BookingRetry {
		r.evicted(name) // no pod ran: the quota goes at once
		return
	}
	r.upsert(r.object(name))
}

// poolNode adds or removes a node of f1's pool, as the autoscaler creates the
// nodes it was asked for and scales them down.
func (r *fuzzRun) poolNode() {
	name := fmt.Sprintf("f1-pool-%d", r.s.n(2))
	if r.s.n(2) == 0 {
		r.both(func(e *Engine) error { e.DeleteNode(name); return nil })
	} else {
		n := Node{Name: name, Flavors: []string{"f1"}, Free: Resources{gpu: 4000, cpu: 8000}, Allocatable: Resources{gpu: 4000, cpu: 8000},
			Labels: map[string]string{"zone": "z", "rack": "r", r.hostKey(): name}}
		r.both(func(e *Engine) error { return e.UpsertNode(n) })
	}
	joined := int32(0)
	for i := range 2 {
		if _, ok := r.e.topo.nodes[fmt.Sprintf("f1-pool-%d", i)]; ok && r.e.topo.nodes[fmt.Sprintf("f1-pool-%d", i)].free != nil {
			joined++
		}
	}
	p := Pool{Name: "f1-pool", Flavor: "f1", Available: 2 - joined, NodeCapacity: Resources{gpu: 4000, cpu: 8000},
		Labels: map[string]string{"zone": "z", "rack": "r"}}
	r.both(func(e *Engine) error { return e.UpsertPool(p) })
}
