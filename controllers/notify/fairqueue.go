package notify

// fairQueue holds deliveries waiting to be sent, one FIFO per namespace,
// and hands them out round-robin across namespaces, at most one in flight
// per namespace. A tenant whose reports are many, or whose sink is slow,
// therefore holds at most one worker and waits its turn behind every other
// namespace with something to send; it cannot fill the queue of another
// namespace either, since each is bounded on its own.
//
// It is a plain data structure, not safe for concurrent use: the
// Dispatcher calls it under its lock.
type fairQueue struct {
	// limit bounds each namespace's waiting deliveries.
	limit int
	byNS  map[string][]delivery
	// ring is the namespaces with deliveries waiting, in the order they
	// are served: one served goes to the back, one in flight keeps its
	// place until it may be served again.
	ring []string
	busy map[string]bool
}

func newFairQueue(limit int) *fairQueue {
	return &fairQueue{limit: limit, byNS: map[string][]delivery{}, busy: map[string]bool{}}
}

// push adds a delivery to its namespace's queue; false when that is full.
func (q *fairQueue) push(d delivery) bool {
	waiting := q.byNS[d.queue]
	if len(waiting) >= q.limit {
		return false
	}
	if len(waiting) == 0 {
		q.ring = append(q.ring, d.queue)
	}
	q.byNS[d.queue] = append(waiting, d)
	return true
}

// pop takes the next delivery of the first namespace in turn that has
// none in flight, and marks that namespace busy until done. It reports
// false when every namespace with deliveries waiting is busy, or none
// waits.
func (q *fairQueue) pop() (delivery, bool) {
	for i, ns := range q.ring {
		if q.busy[ns] {
			continue
		}
		waiting := q.byNS[ns]
		d := waiting[0]
		waiting[0] = delivery{} // let the report be collected
		q.ring = append(q.ring[:i:i], q.ring[i+1:]...)
		if len(waiting) > 1 {
			q.byNS[ns] = waiting[1:]
			q.ring = append(q.ring, ns)
		} else {
			delete(q.byNS, ns)
		}
		q.busy[ns] = true
		return d, true
	}
	return delivery{}, false
}

// done marks the namespace's delivery in flight as finished.
func (q *fairQueue) done(ns string) { delete(q.busy, ns) }

// ready reports whether pop would hand out a delivery.
func (q *fairQueue) ready() bool {
	for _, ns := range q.ring {
		if !q.busy[ns] {
			return true
		}
	}
	return false
}

// drain removes and returns every waiting delivery.
func (q *fairQueue) drain() []delivery {
	var out []delivery
	for _, ns := range q.ring {
		out = append(out, q.byNS[ns]...)
	}
	q.byNS, q.ring = map[string][]delivery{}, nil
	return out
}
