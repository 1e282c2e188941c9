package admission

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// checkInvariants recomputes everything the engine maintains incrementally and
// compares: index membership, usage, cohort aggregates and fair-share keys.
func checkInvariants(e *Engine) error {
	usage := map[string]map[frKey]int64{}
	for k, w := range e.workloads {
		if w.key != k {
			return fmt.Errorf("workload %s stored under %s", w.key, k)
		}
		if err := checkWorkload(e, w, usage); err != nil {
			return err
		}
	}
	for name, c := range e.queues.cqs {
		if err := checkQueue(e, name, c, usage[name]); err != nil {
			return err
		}
	}
	if err := checkDomainSums(e); err != nil {
		return err
	}
	if err := checkReservations(e); err != nil {
		return err
	}
	for name, co := range e.queues.cohorts {
		if err := checkCohort(name, co); err != nil {
			return err
		}
		if err := checkWakeOrder(e, name, co); err != nil {
			return err
		}
	}
	return checkOwn(e)
}

// checkWakeOrder checks a cohort's wake order (wakeorder.go): its members
// with pending work in fair-share order under their current keys, and each
// wake need not marked for recomputation equal to a fresh computation.
func checkWakeOrder(e *Engine, name string, co *cohortState) error {
	if e.opts.wakeWholeCohort {
		return nil
	}
	var want []*cqState
	for _, m := range co.members {
		if m.pending.len() > 0 {
			want = append(want, m)
		}
	}
	slices.SortFunc(want, func(a, b *cqState) int { return cmpTenantKey(a.tkey, b.tkey) })
	if len(want) != len(co.order) {
		return fmt.Errorf("cohort %q wake order holds %d members, %d have pending work", name, len(co.order), len(want))
	}
	for i, m := range want {
		got := co.order[i]
		if got.c != m || got.key != m.tkey {
			return fmt.Errorf("cohort %q wake order[%d] is %q under %+v, want %q under %+v", name, i, got.c.name, got.key, m.name, m.tkey)
		}
		if m.needStale {
			continue
		}
		if res, need := e.order.wakeNeed(m); res != got.res || need != got.need {
			return fmt.Errorf("cohort %q member %q wake need %d of %d, recomputed %d of %d", name, m.name, got.need, got.res, need, res)
		}
	}
	return nil
}

// checkOwn checks that every queue with pending work and work of its own
// is in own, and that own and the queues' flags agree.
func checkOwn(e *Engine) error {
	if e.opts.wakeWholeCohort {
		return nil
	}
	for name, c := range e.queues.cqs {
		if c.inOwn != e.fair.own.has(c) {
			return fmt.Errorf("queue %q: inOwn %v disagrees with own", name, c.inOwn)
		}
		if c.pending.len() > 0 && hasOwnWork(c) && !c.inOwn {
			return fmt.Errorf("queue %q has work of its own (refresh %d, %d fresh) but is not in own", name, c.refresh, c.fresh.len())
		}
	}
	return nil
}

func checkWorkload(e *Engine, w *wl, usage map[string]map[frKey]int64) error {
	switch w.phase {
	case phasePending:
		c, ok := e.queues.cqs[w.cqName]
		if !ok || !c.pending.has(w) {
			return fmt.Errorf("pending %s not in queue %q", w.key, w.cqName)
		}
		if !w.tagged || (!e.opts.LocalQueueFairSharing && w.vstart != 0) || w.vstart < 0 {
			return fmt.Errorf("pending %s has start tag %d (tagged %v)", w.key, w.vstart, w.tagged)
		}
		if w.held != c.reserved.has(w) || (w.held && w.parkRes >= 0) {
			return fmt.Errorf("%s: held %v disagrees with the reserved set", w.key, w.held)
		}
		if w.parkRes >= 0 && !isParked(c, w) {
			return fmt.Errorf("%s claims to be parked but is not", w.key)
		}
		for _, g := range w.ghosts {
			if _, ok := e.queues.cqs[g.cq]; !ok {
				return fmt.Errorf("%s holds quota of unknown queue %q", w.key, g.cq)
			}
			if usage[g.cq] == nil {
				usage[g.cq] = map[frKey]int64{}
			}
			for _, u := range g.usage {
				usage[g.cq][u.fr] += u.amt
			}
		}
	default:
		c, ok := e.queues.cqs[w.admCQ]
		if !ok || !c.admitted.has(w) {
			return fmt.Errorf("admitted %s not in queue %q", w.key, w.admCQ)
		}
		if usage[w.admCQ] == nil {
			usage[w.admCQ] = map[frKey]int64{}
		}
		for _, u := range w.usage {
			usage[w.admCQ][u.fr] += u.amt
		}
		if len(w.ghosts) > 0 {
			return fmt.Errorf("admitted %s still holds quota of its victims", w.key)
		}
	}
	return nil
}

func checkQueue(e *Engine, name string, c *cqState, usage map[frKey]int64) error {
	if c.name != name {
		return fmt.Errorf("queue %q stored under %q", c.name, name)
	}
	var err error
	c.pending.ascend(func(w *wl) bool {
		if e.workloads[w.key] != w || w.phase != phasePending || w.cqName != name {
			err = fmt.Errorf("queue %q holds stale pending %s", name, w.key)
		}
		return err == nil
	})
	c.fresh.ascend(func(w *wl) bool {
		if !c.pending.has(w) {
			err = fmt.Errorf("queue %q: fresh %s is not pending", name, w.key)
		}
		return err == nil
	})
	for r, t := range c.parked {
		t.Ascend(func(b *parkBucket) bool {
			if b.items.len() == 0 {
				err = fmt.Errorf("queue %q: empty park bucket", name)
			}
			b.items.ascend(func(w *wl) bool {
				if !c.pending.has(w) || w.parkRes != r || bucketKey(w.parkAmt) != b.key || c.fresh.has(w) {
					err = fmt.Errorf("queue %q: stale parked %s", name, w.key)
				}
				return err == nil
			})
			return err == nil
		})
	}
	c.admitted.ascend(func(w *wl) bool {
		if e.workloads[w.key] != w || w.phase == phasePending || w.admCQ != name {
			err = fmt.Errorf("queue %q holds stale admitted %s", name, w.key)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if usage == nil {
		usage = map[frKey]int64{}
	}
	maps.DeleteFunc(usage, func(_ frKey, v int64) bool { return v == 0 })
	if !maps.Equal(usage, c.usage) {
		return fmt.Errorf("queue %q usage %v, recomputed %v", name, c.usage, usage)
	}
	inTenants := e.fair.tenants.has(c)
	if inTenants != (c.pending.len() > 0) {
		return fmt.Errorf("queue %q: in tenant index %v with %d pending", name, inTenants, c.pending.len())
	}
	want := e.fair.tenantKeyOf(c)
	if inTenants && c.tkey != want {
		return fmt.Errorf("queue %q: tenant key %+v, recomputed %+v", name, c.tkey, want)
	}
	if c.spec == nil && c.cohort != nil {
		return fmt.Errorf("queue %q has no spec but is in cohort %q", name, c.cohort.name)
	}
	return nil
}

func checkCohort(name string, co *cohortState) error {
	pool, used := map[frKey]int64{}, map[frKey]int64{}
	for _, m := range co.members {
		if m.cohort != co {
			return fmt.Errorf("cohort %q lists %q, which is not attached", name, m.name)
		}
		for k, q := range m.quota {
			pool[k] = satAdd(pool[k], q.lendable)
		}
		for k, u := range m.usage {
			if d := m.poolUse(k, u); d != 0 {
				used[k] += d
			}
		}
	}
	maps.DeleteFunc(co.used, func(_ frKey, v int64) bool { return v == 0 })
	if !maps.Equal(pool, co.pool) && (len(pool) != 0 || len(co.pool) != 0) {
		return fmt.Errorf("cohort %q pool %v, recomputed %v", name, co.pool, pool)
	}
	if !maps.Equal(used, co.used) {
		return fmt.Errorf("cohort %q used %v, recomputed %v", name, co.used, used)
	}
	return checkCohortParked(name, co)
}

// checkCohortParked recounts the members' parked workloads by resource and
// size bucket, and checks the cohort's cached smallest bucket.
func checkCohortParked(name string, co *cohortState) error {
	counts := map[int32]map[int64]int32{}
	for _, m := range co.members {
		for res, t := range m.parked {
			t.Ascend(func(b *parkBucket) bool {
				if counts[res] == nil {
					counts[res] = map[int64]int32{}
				}
				counts[res][b.key] += int32(b.items.len())
				return true
			})
		}
	}
	if len(counts) != len(co.parked) {
		return fmt.Errorf("cohort %q counts parked workloads of %d resources, recounted %d", name, len(co.parked), len(counts))
	}
	for res, want := range counts {
		ps := co.parked[res]
		if ps == nil || !maps.Equal(ps.n, want) {
			return fmt.Errorf("cohort %q parked sizes of resource %d: %v, recounted %v", name, res, ps, want)
		}
		least := int64(math.MaxInt64)
		for k := range want {
			least = min(least, k)
		}
		if ps.least != 0 && ps.least != least {
			return fmt.Errorf("cohort %q smallest parked bucket of resource %d: %d, recounted %d", name, res, ps.least, least)
		}
	}
	return nil
}

// usageSnapshot maps each (queue, flavor, resource) and (cohort, flavor, resource) to
// usage, for comparing before and after a cycle.
type usageSnapshot map[limitKey]int64

// limitKey names a queue's or a cohort's (flavor, resource).
type limitKey struct {
	cq, cohort string
	fr         frKey
}

func snapshotUsage(e *Engine) usageSnapshot {
	s := usageSnapshot{}
	for name, c := range e.queues.cqs {
		for k, u := range c.usage {
			s[limitKey{cq: name, fr: k}] = u
		}
	}
	for name, co := range e.queues.cohorts {
		for k, u := range co.used {
			s[limitKey{cohort: name, fr: k}] = u
		}
	}
	return s
}

// limitViolationsFR lists every queue or cohort (flavor, resource) above its limit:
// a queue above nominal (no cohort) or nominal+borrowingLimit, or using a flavor it
// has no quota for; a cohort whose members borrow more than they lend.
func limitViolationsFR(e *Engine) []limitKey {
	var out []limitKey
	for name, c := range e.queues.cqs {
		if c.spec == nil {
			continue
		}
		for k, u := range c.usage {
			q, ok := c.quota[k]
			if !ok || (c.cohort == nil && u > q.nominal) ||
				(c.cohort != nil && q.borrowLimit >= 0 && u > satAdd(q.nominal, q.borrowLimit)) {
				out = append(out, limitKey{cq: name, fr: k})
			}
		}
	}
	for name, co := range e.queues.cohorts {
		for k, u := range co.used {
			if u > co.pool[k] {
				out = append(out, limitKey{cohort: name, fr: k})
			}
		}
	}
	return out
}

func isParked(c *cqState, w *wl) bool {
	t, ok := c.parked[w.parkRes]
	if !ok {
		return false
	}
	b, ok := t.Get(&parkBucket{key: bucketKey(w.parkAmt)})
	return ok && b.items.has(w)
}

// checkDomainSums recomputes every cached domain sum of what is left.
func checkDomainSums(e *Engine) error {
	for name, tf := range e.topo.flavorTopo {
		if tf.index == nil {
			continue
		}
		for k, sum := range tf.index.left {
			var want vec
			for _, n := range tf.nodesIn(strings.Split(k, "\x00")) {
				want.addAll(n.leftVec(), 1)
			}
			if !slices.Equal(trimmed(sum), trimmed(want)) {
				return fmt.Errorf("flavor %s, domain %q: %v left by the sums, %v by its nodes", name, k, sum, want)
			}
		}
	}
	return nil
}

// trimmed is v without its trailing zeros: two vectors of the same amounts
// compare equal however long they grew.
func trimmed(v vec) vec {
	for len(v) > 0 && v[len(v)-1] == 0 {
		v = v[:len(v)-1]
	}
	return v
}

// plannedShares sums, per node, what the placements of admitted workloads
// and the capacity held for preemptors reserve there.
func plannedShares(e *Engine) (map[string]vec, error) {
	want := map[string]vec{}
	add := func(p *placement) {
		for _, s := range p.shares {
			v := want[s.node]
			for _, r := range s.amt {
				v.add(r.res, r.amt)
			}
			want[s.node] = v
		}
	}
	for _, w := range e.workloads {
		if w.hold != nil {
			if w.phase != phasePending {
				return nil, fmt.Errorf("admitted %s still holds capacity of its victims", w.key)
			}
			for _, p := range w.hold.held {
				add(p)
			}
		}
		if w.placed == nil {
			continue
		}
		if w.phase == phasePending {
			return nil, fmt.Errorf("pending %s holds a placement", w.key)
		}
		add(w.placed)
	}
	if len(e.pre.deferredHolds) > 0 {
		return nil, fmt.Errorf("%d holds left over from a cycle", len(e.pre.deferredHolds))
	}
	return want, nil
}

// checkReservations recomputes every node's reserved capacity from the placements
// of admitted workloads.
func checkReservations(e *Engine) error {
	want, err := plannedShares(e)
	if err != nil {
		return err
	}
	for _, w := range e.workloads {
		_, booking := e.books.booking[w]
		inFlight := w.phase == phaseAssumed || w.bk == nil || w.bk.State == BookingPending
		if want := w.phase != phasePending && w.adm != nil && w.adm.Provisioning != nil && inFlight; booking != want {
			return fmt.Errorf("%s: in the booking set %v, want %v", w.key, booking, want)
		}
		_, awaiting := e.books.awaiting[w]
		if want := w.phase == phaseAdmitted && !booking && w.placed != nil && len(w.placed.newNodes) > 0; awaiting != want {
			return fmt.Errorf("%s: awaiting its new nodes %v, want %v", w.key, awaiting, want)
		}
	}
	for w := range e.books.booking {
		if e.workloads[w.key] != w {
			return fmt.Errorf("booking set holds a forgotten workload %s", w.key)
		}
	}
	for w := range e.books.awaiting {
		if e.workloads[w.key] != w {
			return fmt.Errorf("awaiting set holds a forgotten workload %s", w.key)
		}
	}
	pools := map[string]int32{}
	for _, w := range e.workloads {
		if w.placed != nil {
			for p, k := range w.placed.newNodes {
				pools[p] += k
			}
		}
		if w.hold != nil {
			for _, h := range w.hold.held {
				for p, k := range h.newNodes {
					pools[p] += k
				}
			}
		}
	}
	for name, p := range e.topo.pools {
		if p.reserved != pools[name] {
			return fmt.Errorf("pool %s reserves %d nodes, placements say %d", name, p.reserved, pools[name])
		}
	}
	for name, n := range e.topo.nodes {
		if !n.reserved.isZero() || !want[name].isZero() {
			if slices.Equal(trimmed(n.reserved), trimmed(want[name])) {
				delete(want, name)
				continue
			}
			return fmt.Errorf("node %s reserves %v, placements say %v", name, n.reserved, want[name])
		}
		delete(want, name)
	}
	if len(want) > 0 {
		return fmt.Errorf("placements on unknown nodes: %v", want)
	}
	return nil
}
