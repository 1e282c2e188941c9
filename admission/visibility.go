package admission

// PendingQuery selects a page of a ClusterQueue's pending workloads.
type PendingQuery struct {
	// ClusterQueue whose queue is listed.
	ClusterQueue string
	// Namespace and LocalQueue, when LocalQueue is set, keep only that
	// LocalQueue's workloads; positions stay those of the whole queue.
	Namespace, LocalQueue string
	// Offset skips that many of the selected workloads; Limit caps the page
	// (≤ 0: no cap).
	Offset, Limit int
	// Workload, when set, lists that workload alone (if it is among the
	// selected ones), whatever Offset and Limit say: a lookup by name that
	// explains one workload instead of a page of them. Total still counts
	// every selected workload.
	Workload WorkloadKey
}

// PendingWorkload is one pending workload as a person looking at the queue
// needs it: where it stands and why it is not admitted yet.
type PendingWorkload struct {
	Key        WorkloadKey
	LocalQueue string
	Priority   int32
	// PositionInClusterQueue and PositionInLocalQueue count the pending
	// workloads served before it (0 = next).
	PositionInClusterQueue int
	PositionInLocalQueue   int
	// Explanation carries the reason, message, shortfalls and preemption
	// what-if as Explain gives them; its Position is PositionInClusterQueue.
	Explanation Explanation
	// Booking is the workload's capacity booking record, if it has one: the
	// domains whose bookings failed and when it may try again.
	Booking *Booking
}

// PendingPage is a page of a ClusterQueue's pending workloads, in the order
// the engine serves them.
type PendingPage struct {
	Items []PendingWorkload
	// Total is the number of pending workloads the query selects.
	Total int
	// FairShare is the ClusterQueue's standing.
	FairShare FairShare
}

// Pending lists pending workloads of a ClusterQueue in the order Cycle
// considers them, each explained as Explain would. It changes nothing. The
// second result is false when the engine knows no such ClusterQueue.
//
// Cost: one walk of the queue, plus Explain's fit and preemption what-if for
// each workload of the page (one with q.Workload), so callers bound Limit.
func (e *Engine) Pending(q PendingQuery) (PendingPage, bool) {
	page, ok := e.PendingOrder(q)
	if !ok {
		return page, false
	}
	for i := range page.Items {
		page.Items[i], _ = e.ExplainPending(page.Items[i], page.FairShare)
	}
	return page, true
}

// PendingOrder is Pending without the explanations: the page's workloads
// with their positions and bookings, for a caller that explains them
// itself (ExplainPending), a few at a time. Its cost is one walk of the
// queue.
func (e *Engine) PendingOrder(q PendingQuery) (PendingPage, bool) {
	c, ok := e.queues.cqs[q.ClusterQueue]
	if !ok {
		return PendingPage{}, false
	}
	page := PendingPage{FairShare: e.fair.standing(c)}
	inLQ := map[lqKey]int{}
	pos := 0
	lookup := q.Workload != WorkloadKey{}
	c.pending.ascend(func(w *wl) bool {
		lq := lqKey{namespace: w.key.Namespace, name: w.lq}
		lqPos := inLQ[lq]
		inLQ[lq]++
		cqPos := pos
		pos++
		if q.LocalQueue != "" && (lq.namespace != q.Namespace || lq.name != q.LocalQueue) {
			return true
		}
		page.Total++
		switch {
		case lookup && w.key != q.Workload:
			return true
		case !lookup && (page.Total <= q.Offset || (q.Limit > 0 && len(page.Items) >= q.Limit)):
			return true
		}
		item := PendingWorkload{Key: w.key, LocalQueue: w.lq, Priority: w.prio,
			PositionInClusterQueue: cqPos, PositionInLocalQueue: lqPos}
		if w.bk != nil {
			// A copy of the record's containers too: the engine avoids the
			// failed domains it holds (w.avoid).
			bk := cloneBooking(*w.bk)
			item.Booking = &bk
		}
		page.Items = append(page.Items, item)
		return true
	})
	return page, true
}

// ExplainPending fills in the explanation of an item PendingOrder listed,
// at the position it was listed at, with the queue's fair-share standing
// fs. The second result is false when the workload is no longer pending
// (admitted or deleted since): the item is returned unchanged.
func (e *Engine) ExplainPending(item PendingWorkload, fs FairShare) (PendingWorkload, bool) {
	w, ok := e.workloads[item.Key]
	if !ok || w.phase != phasePending {
		return item, false
	}
	c := e.queues.cqs[w.cqName]
	head, _ := c.pending.min()
	item.Explanation = e.explainAt(c, w, head, item.PositionInClusterQueue)
	item.Explanation.FairShare = fs
	return item, true
}

// IsPending reports whether the engine holds the workload as pending: a
// cheap check for a caller that keeps explanations from an earlier call of
// ExplainPending.
func (e *Engine) IsPending(key WorkloadKey) bool {
	w, ok := e.workloads[key]
	return ok && w.phase == phasePending
}
