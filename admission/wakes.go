package admission

// wakes makes workloads that wait for topology capacity candidates again when
// capacity changed: every one of them when anything may fit now (a pool, a
// flavor or a node changed, a reservation was returned), or only those a node
// whose free capacity grew can now take a pod of. It reads the topology's
// waiting list and the bookings, and puts the woken into their queue's order.
type wakes struct {
	workloads map[WorkloadKey]*wl
	queues    *clusterQueues
	order     *queueOrder
	fair      *fairSharing
	topo      *topology
	books     *bookings
}

// nodeGrew wakes the workloads waiting for topology capacity that n, whose
// free capacity grew, can now take a pod of. The others cannot fit any
// better: no other node changed, and n still takes none of their pods.
// Waking every waiting gang on every pod that ends would re-place each of
// them on every node of its flavor, for nothing, many times a second on a
// busy cluster.
func (wk *wakes) nodeGrew(n *topoNode) {
	wk.books.settleAwaiting()
	if wk.topo.freed {
		wk.capacityChanged() // a reservation was returned: anything may fit
		return
	}
	kept := wk.topo.topoWaiting[:0]
	for _, w := range wk.topo.topoWaiting {
		if w.phase == phasePending && wk.workloads[w.key] == w && !wk.topo.takesAPodOf(w, n) {
			kept = append(kept, w)
			continue
		}
		wk.wake(w)
	}
	clear(wk.topo.topoWaiting[len(kept):])
	wk.topo.topoWaiting = kept
}

// wake makes a workload that waited for topology capacity a candidate
// again.
func (wk *wakes) wake(w *wl) {
	w.topoWait = false
	if w.phase == phasePending && wk.workloads[w.key] == w {
		c := wk.queues.cqs[w.cqName]
		if wk.fair.inCycle() {
			wk.order.freshLater = append(wk.order.freshLater, w)
		} else {
			wk.order.makeFresh(c, w)
		}
		wk.fair.rekey(c)
	}
}

// capacityChanged makes every workload waiting for topology capacity a candidate
// again, after moving the reservations of provisioned gangs whose new nodes
// arrived onto those nodes.
func (wk *wakes) capacityChanged() {
	wk.books.settleAwaiting()
	wk.topo.freed = false
	for _, w := range wk.topo.topoWaiting {
		wk.wake(w)
	}
	wk.topo.topoWaiting = wk.topo.topoWaiting[:0]
}
