package autoscale

// Fitting pods is generic over the callers' own pods (P) and nodes (N):
// the stand-in fits Kubernetes pod specs with DRA claims and anti-affinity
// on ResourceLists, the simulator fixed arrays of amounts in its innermost
// loop. take is the only test: it reports whether the pod fits the node
// (selectors, taints, free resources, devices…) and, if so, places it
// there, consuming the node's room.
//
// A node's room only shrinks as pods are placed, so a node that refused a
// pod refuses the same pod again: when a pod equals the one before it
// (the simulator passes one pointer for every pod of a gang), the scan
// starts where that one landed, and a pod that one found no node for is
// not tried. Gangs of hundreds of pods cost one pass over the nodes, not
// one per pod.

// FirstFit places each pod, in order, on the first node that takes it, as
// cluster-autoscaler's scheduling simulation places the pods of a request
// on existing nodes before any scale-up. It returns, per pod, the index of
// its node, -1 when no node took it.
func FirstFit[P comparable, N any](pods []P, nodes []N, take func(N, P) bool) []int {
	at := make([]int, len(pods))
	for i, p := range pods {
		from := 0
		if i > 0 && pods[i-1] == p {
			if at[i-1] < 0 {
				at[i] = -1
				continue
			}
			from = at[i-1]
		}
		at[i] = firstTaking(p, nodes, from, take)
	}
	return at
}

// firstTaking is the index of the first node from from on that takes p,
// -1 if none does.
func firstTaking[P, N any](p P, nodes []N, from int, take func(N, P) bool) int {
	for j := from; j < len(nodes); j++ {
		if take(nodes[j], p) {
			return j
		}
	}
	return -1
}

// Estimate is cluster-autoscaler's binpacking estimator for one node
// group: each pod, in order, goes on the first new node already opened
// that takes it, else on a fresh node that open returns — open(i) is the
// group's i-th new node, false when the group has no room for it (its
// maximum, counting nodes being created). A pod no node takes is left out;
// with allOrNothing (best-effort-atomic-scale-up) the estimate then fails
// and ok is false. It returns the opened nodes and, per pod, the index of
// its node or -1.
func Estimate[P comparable, N any](pods []P, open func(int) (N, bool), take func(N, P) bool, allOrNothing bool) (nodes []N, at []int, ok bool) {
	at = make([]int, len(pods))
	for i, p := range pods {
		from := 0
		if i > 0 && pods[i-1] == p {
			// An equal pod left out is left out again: no room, or a fresh
			// node does not take it.
			if at[i-1] < 0 {
				at[i] = -1
				continue
			}
			from = at[i-1]
		}
		if at[i] = firstTaking(p, nodes, from, take); at[i] >= 0 {
			continue
		}
		if n, room := open(len(nodes)); room && take(n, p) {
			nodes = append(nodes, n)
			at[i] = len(nodes) - 1
			continue
		}
		if allOrNothing {
			return nil, nil, false
		}
	}
	return nodes, at, true
}
