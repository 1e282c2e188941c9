package admission

// cycleWork is what a running cycle takes, in fair-share order: a binary
// min-heap of entries with their keys inline, each either a queue (from
// own, or one that got work or a new key while the cycle ran) or a released
// cohort's cursor, standing at the next member a release could help
// (wakeorder.go). A queue's cycMark says where it stands: mark, in the heap
// (taken); mark+1, done for this cycle; anything else, not taken.
type cycleWork struct {
	items []workItem
	mark  uint64
	// last is the greatest key taken so far (valid when took): a queue not
	// taken whose key is behind it is one the old cycle would have taken
	// already and found with nothing to do.
	last tenantKey
	took bool
	// cursors: the released cohorts' cursors are in the heap; passedOver
	// counts the members they step over (Engine.passedOver).
	cursors    bool
	passedOver *uint64
}

// workItem is a queue (c) or a cohort's cursor (co) at key.
type workItem struct {
	key tenantKey
	c   *cqState
	co  *cohortState
	gen uint32
}

func lessItem(a, b *workItem) bool { return cmpTenantKey(a.key, b.key) < 0 }

// passed reports whether key k is behind the cycle's progress.
func (cw *cycleWork) passed(k tenantKey) bool { return cw.took && cmpTenantKey(k, cw.last) < 0 }

// take puts c in the heap under its current key.
func (cw *cycleWork) take(c *cqState) {
	cw.claim(c)
	cw.push(workItem{key: c.tkey, c: c, gen: c.workGen})
}

// claim marks c taken (its older entries stale). A member of a cohort that
// released is woken as the old cycle's release would have woken it.
func (cw *cycleWork) claim(c *cqState) {
	if c.cycMark != cw.mark && c.cohort != nil && c.cohort.released {
		c.refresh = max(c.refresh, refreshCapacity)
	}
	c.cycMark = cw.mark
	c.workGen++
}

// keep puts a queue served in this cycle back under its current key: it may
// have more to admit.
func (cw *cycleWork) keep(c *cqState) {
	c.workGen++
	cw.push(workItem{key: c.tkey, c: c, gen: c.workGen})
}

// done marks c finished for this cycle.
func (cw *cycleWork) done(c *cqState) { c.cycMark = cw.mark + 1 }

// rekeyed follows c's key change from old: a queue in the heap moves with
// it; one not taken is taken at its new key, unless the old cycle had
// passed it already (or it joined the tenants in this cycle, joined).
func (cw *cycleWork) rekeyed(c *cqState, old tenantKey, joined, left bool) {
	switch {
	case c.cycMark == cw.mark+1:
	case left:
		cw.done(c)
	case c.cycMark == cw.mark:
		cw.keep(c)
	case joined || cw.passed(old):
		cw.done(c)
	default:
		cw.take(c)
	}
}

// cursor pushes co's cursor at its first member after key from (all of
// them when first) that a release could help now, and counts the members
// it steps over as passed over.
func (cw *cycleWork) cursor(co *cohortState, from tenantKey, first bool) {
	i := 0
	if !first {
		j, found := co.orderIndex(from)
		i = j
		if found {
			i++
		}
	}
	for ; i < len(co.order); i++ {
		e := &co.order[i]
		if co.canHelp(e) {
			cw.push(workItem{key: e.key, co: co})
			return
		}
		*cw.passedOver++
	}
}

// next pops the next queue to serve and marks it taken, resolving cursors
// on the way; false when the cycle has nothing left.
func (cw *cycleWork) next() (*cqState, bool) {
	for len(cw.items) > 0 {
		it := cw.pop()
		if it.c != nil {
			if it.c.cycMark != cw.mark || it.gen != it.c.workGen {
				continue // stale: moved, or done
			}
			cw.advance(it.key)
			return it.c, true
		}
		if c := cw.member(it); c != nil {
			return c, true
		}
	}
	return nil, false
}

// member resolves a cursor entry: the member it stands at, if that is still
// the first one the release could help; else the cursor moves on.
func (cw *cycleWork) member(it workItem) *cqState {
	co := it.co
	i, found := co.orderIndex(it.key)
	if !found || !co.canHelp(&co.order[i]) {
		cw.cursor(co, it.key, false)
		return nil
	}
	c := co.order[i].c
	cw.cursor(co, it.key, false)
	if c.cycMark == cw.mark || c.cycMark == cw.mark+1 {
		return nil // taken on its own, or done
	}
	cw.advance(it.key)
	cw.claim(c)
	return c
}

// advance records that the cycle took an entry at key k.
func (cw *cycleWork) advance(k tenantKey) {
	if !cw.took || cmpTenantKey(k, cw.last) > 0 {
		cw.last, cw.took = k, true
	}
}

func (cw *cycleWork) push(it workItem) {
	cw.items = append(cw.items, it)
	i := len(cw.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !lessItem(&cw.items[i], &cw.items[p]) {
			return
		}
		cw.items[i], cw.items[p] = cw.items[p], cw.items[i]
		i = p
	}
}

func (cw *cycleWork) pop() workItem {
	top := cw.items[0]
	last := len(cw.items) - 1
	cw.items[0] = cw.items[last]
	cw.items[last] = workItem{}
	cw.items = cw.items[:last]
	i, n := 0, last
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && lessItem(&cw.items[r], &cw.items[l]) {
			j = r
		}
		if !lessItem(&cw.items[j], &cw.items[i]) {
			break
		}
		cw.items[i], cw.items[j] = cw.items[j], cw.items[i]
		i = j
	}
	return top
}
