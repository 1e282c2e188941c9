package sim

import (
	"slices"
	"time"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/autoscale"
)

// The autoscaler's capacity buffers, one per service with a headroom
// policy, as cluster-autoscaler serves a CapacityBuffer
// (docs/autoscaler.md): each loop it injects the buffer's pods — here, the
// keeper's size in whole replicas — among the unschedulable pods; those
// that fit the free room of existing nodes (or of nodes already booting)
// need nothing, and the rest make a normal scale-up of a group whose
// template takes them. The fake pods stay in the cluster state that
// scale-down simulates, so a node whose room holds them is not removed.
// Capacity is not reserved for particular pods: a real replica takes the
// room, the buffer's pods no longer fit, and the next loop scales up to
// restore it. Only the headroom pools hold the buffer (its pods select
// their label and tolerate their taint), so only the service's replicas
// ever use that room.

// keepHeadroom runs every buffer's loop; it says whether to look again
// next loop (some buffer is short).
func (a *autoscaler) keepHeadroom(now time.Duration) bool {
	more := false
	for _, k := range a.keepers {
		if k.model.Policy != nil && a.keepBuffer(k, now) {
			more = true
		}
	}
	return more
}

// keepBuffer fits k's buffer on its pools' room, marks the nodes that hold
// it, and scales up for what does not fit; it says whether it is short.
func (a *autoscaler) keepBuffer(k *keeper, now time.Duration) bool {
	pool := k.model.Pool
	byDomain := map[string][]*node{}
	var all []*node
	for _, n := range slices.Concat(a.c.sorted, a.c.booting) {
		if n.labels[berthv1.HeadroomLabel] != pool {
			continue
		}
		all = append(all, n)
		if n.booked == "" {
			byDomain[n.labels[k.level]] = append(byDomain[n.labels[k.level]], n)
		}
	}
	kept, holds := int32(0), map[*node]bool{}
	for _, d := range sortedKeys(byDomain) {
		if kept >= k.size {
			break
		}
		kept += a.fitReplicas(k, byDomain[d], k.size-kept, holds)
	}
	for _, n := range all {
		was := n.headroom
		n.headroom = holds[n]
		if was && !n.headroom && n.ready && n.pods == 0 {
			a.armScaleDown(n, n.emptySince)
		}
	}
	k.kept = kept
	if kept >= k.size {
		return false
	}
	probe := &pod{requests: k.requests, selector: map[string]string{berthv1.HeadroomLabel: pool}, headroom: pool}
	for c := k.size - kept; c >= 1; c-- {
		g, count, o := a.bestGroupFor(probe, c*k.pods, now)
		if g == nil {
			continue
		}
		if o.OutOfStock {
			// The cloud has none: the group backs off, as after a failed
			// scale-up for pods, and the next loop tries another.
			g.backoffUntil = now + autoscale.NodeGroupBackoff
			a.logf(now, "autoscaler: headroom of %s: %s is out of stock, backing off", k.model.Class, g.pool.Name)
			return true
		}
		for range count {
			n := a.createNode(g, now, "headroom/"+k.model.Class)
			n.headroom = true
		}
		a.logf(now, "autoscaler: headroom of %s: %d of %d replicas kept, %d new nodes in %s for %d more", k.model.Class, kept, k.size, count, g.pool.Name, c)
		return true
	}
	a.logf(now, "autoscaler: headroom of %s: %d of %d replicas kept, no pool can grow for more", k.model.Class, kept, k.size)
	return true
}

// fitReplicas fits up to want whole replicas of k on the room of nodes, one
// domain's nodes, marking in holds the nodes whose room they take; it
// returns how many fit. A booting node offers all it will have.
func (a *autoscaler) fitReplicas(k *keeper, nodes []*node, want int32, holds map[*node]bool) int32 {
	room := make([]int64, len(nodes))
	total := int64(0)
	for i, n := range nodes {
		free := n.alloc
		if n.ready {
			free = n.free
			free.add(&n.caReserved, -1)
		}
		room[i] = max(0, podsPerNode(&free, &k.requests))
		total += room[i]
	}
	fits := min(int32(total/int64(k.pods)), want)
	need := int64(fits) * int64(k.pods)
	for i, n := range nodes {
		if need <= 0 {
			break
		}
		if room[i] > 0 {
			holds[n] = true
			need -= room[i]
		}
	}
	return fits
}
