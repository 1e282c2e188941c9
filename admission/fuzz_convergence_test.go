package admission

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// FuzzConvergence sets up random queues, then sends three waves of workloads (later
// waves with higher priorities, so they preempt). After each wave it cycles with the
// controller applying every decision at once and no new input; it must reach a fixed
// point (a cycle with no admission and no preemption): preemptions never loop.
func FuzzConvergence(f *testing.F) {
	f.Add([]byte("\x01\x02\x00\x01\x02\x00\x05\x04\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x03\x01\x01\x02\x02\x01\x02\x03\x04\x05\x06\x07\x08\x00\x00\x01\x02\x00\x05\x06\x00\x07"))
	f.Fuzz(func(t *testing.T, data []byte) { runConvergence(fuzzSetup(t, data)) })
}

// runConvergence is one FuzzConvergence input: three waves, each to a fixed point.
func runConvergence(r *fuzzRun) {
	for wave := range int32(3) {
		for range 5 + r.s.n(20) {
			r.clock++
			name := fmt.Sprintf("w%d", r.clock)
			w := r.onHosts(r.tolerate(fuzzWorkload(r.s, name, r.clock)))
			w.Priority += 2 * wave
			r.upsert(w)
			r.m.specs[name], r.m.phase[name] = w, phasePending
		}
		if r.converge(); r.stuck {
			return
		}
	}
}

// converge cycles until nothing is admitted or preempted, applying every decision.
// Every preemptor must be admitted in the cycle after its victims are evicted (all
// at once here), in the domain it preempted for: else the victims could come back
// and it would preempt again (checkPreemptors).
func (r *fuzzRun) converge() {
	var waiting map[WorkloadKey]*domainHold
	evicted := map[WorkloadKey]bool{} // preempted, not admitted since
	for round := 0; ; round++ {
		if round == 100 {
			if r.stuck = true; r.decisions != nil {
				r.record("no fixed point")
				return
			}
			r.t.Fatalf("no fixed point after %d rounds", round)
		}
		r.now = r.now.Add(time.Minute)
		before, reserved, pools := snapshotUsage(r.e), reservedSnapshot(r.e), poolSnapshot(r.e)
		res := r.e.Cycle(r.now)
		r.twin.Cycle(r.now)
		r.record(res)
		if r.onCycle != nil {
			r.onCycle(res)
		}
		r.checkCycle(res, before)
		r.checkPlacements(res, reserved, pools)
		r.checkPreemptors(waiting, res)
		waiting = r.preemptors(res)
		for _, p := range res.Preemptions {
			if evicted[p.Preemptor] {
				r.t.Fatalf("%s preempts %s before it was admitted again after its own preemption", p.Preemptor, p.Victim)
			}
			evicted[p.Victim] = true
		}
		for _, a := range res.Admitted {
			delete(evicted, a.Key)
		}
		if len(res.Admitted) == 0 && len(res.Preemptions) == 0 && len(res.Bookings) == 0 {
			return
		}
		if round > 95 && r.decisions == nil { // about to fail: show the loop
			r.t.Logf("round %d: %s", round, fmtResult(res))
		}
		for _, a := range res.Admitted {
			name := a.Key.Name
			adm := a.Admission
			r.m.adm[name], r.m.bk[name] = &adm, reservedRecord(r.m.bk[name], adm)
			r.upsert(r.object(name))
			r.m.phase[name] = phaseAdmitted
			if adm.Provisioning != nil {
				r.answer(name, r.convergeAnswer(adm.Provisioning.Attempt))
			}
		}
		for _, p := range res.Preemptions {
			r.evicted(p.Victim.Name)
		}
		for _, d := range res.Bookings {
			r.confirmBooking(d)
		}
		r.checkModel()
	}
}

// preemptors maps each preemptor of res to the domain it preempted for (nil:
// quota only).
func (r *fuzzRun) preemptors(res Result) map[WorkloadKey]*domainHold {
	out := map[WorkloadKey]*domainHold{}
	for _, p := range res.Preemptions {
		var h *domainHold
		if w := r.e.workloads[p.Preemptor]; w != nil && w.hold != nil {
			c := *w.hold
			c.held = nil
			h = &c
		}
		out[p.Preemptor] = h
	}
	return out
}

// checkPreemptors: every preemptor of the previous cycle, whose victims were all
// evicted since and nothing else changed, is admitted by this one, in the domain
// it preempted for.
func (r *fuzzRun) checkPreemptors(waiting map[WorkloadKey]*domainHold, res Result) {
	for k, h := range waiting {
		i := slices.IndexFunc(res.Admitted, func(a Admitted) bool { return a.Key == k })
		if i < 0 {
			where := "quota"
			if h != nil {
				where = h.where()
			}
			r.t.Fatalf("%s preempted (for %s), its victims are gone, and it is not admitted: %s", k, where, fmtResult(res))
		}
		if h == nil || !h.check || h.level < 0 {
			continue
		}
		if t := res.Admitted[i].Admission.Topology; t == nil || t.Flavor != h.flavor || !slices.Equal(t.Domain, h.key) {
			r.t.Fatalf("%s preempted for %s and was admitted with %+v", k, h.where(), t)
		}
	}
}

// convergeAnswer is the autoscaler's answer to a new booking while the
// harness converges: mostly provisioned at once, else failed or out of
// stock for up to ten minutes, so failovers, backoffs and giving up must
// converge too.
func (r *fuzzRun) convergeAnswer(attempt int32) BookingReport {
	rep := BookingReport{Attempt: attempt, Answer: AnswerProvisioned, Message: "from the fuzzer"}
	switch r.s.n(4) {
	case 0:
		rep.Answer = AnswerFailed
	case 1:
		rep.Answer = AnswerCapacityNotFound
		rep.Since = r.now.Add(-time.Duration(r.s.n(11)) * time.Minute).UnixNano()
	}
	return rep
}
