package runner

import (
	"fmt"
	"slices"
	"strconv"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// holding is an interval in which a workload held quota, in etcd
// revisions: from the write that admitted it to the write that finished or
// evicted it (0: still held at the end of the run).
type holding struct {
	wl       int
	from, to uint64
}

// revision returns the object's resourceVersion as a number. The API
// server's etcd storage makes it one: the revision of the write, ordered
// across all objects of a resource. The caller holds t.mu.
func (t *tracker) revision(wl *berthv1.Workload) uint64 {
	rv, err := strconv.ParseUint(wl.ResourceVersion, 10, 64)
	if err != nil {
		t.opaqueRV = true
	}
	return rv
}

// released closes workload i's current holding at revision rv. The caller
// holds t.mu.
func (t *tracker) released(i int, rv uint64) {
	t.holdings = append(t.holdings, holding{wl: i, from: t.recs[i].heldFrom, to: rv})
}

// quotaViolations replays every holding in revision order — the order of
// the writes in etcd, which is the order berth saw them in, whatever order
// the runner's watch delivered them in (a relist delivers them in any order)
// — and describes each admission after which more quota was held than a
// ClusterQueue's nominal + borrowing limit or its cohort's pool. A workload
// counts from its admission to its finish or its eviction (berth counts an
// evicted one until it is requeued, later), so any excess is berth's. The
// caller holds t.mu.
func (t *tracker) quotaViolations() ([]string, error) {
	if t.opaqueRV {
		return nil, fmt.Errorf("resourceVersions are not numbers: quota not checked")
	}
	type event struct {
		rv   uint64
		wl   int
		sign int64
	}
	var events []event
	add := func(h holding) {
		events = append(events, event{h.from, h.wl, 1})
		if h.to != 0 {
			events = append(events, event{h.to, h.wl, -1})
		}
	}
	for _, h := range t.holdings {
		add(h)
	}
	for i := range t.recs {
		if r := &t.recs[i]; r.running {
			add(holding{wl: i, from: r.heldFrom})
		}
	}
	slices.SortFunc(events, func(a, b event) int {
		if a.rv != b.rv {
			return compareUint(a.rv, b.rv)
		}
		return int(a.sign - b.sign) // releases first
	})
	usage := make([][]int64, len(t.cqs))
	for i := range usage {
		usage[i] = make([]int64, len(t.usage[i]))
	}
	var out []string
	for _, e := range events {
		w := t.wls[e.wl]
		for r, amt := range t.req[w.Class] {
			usage[w.ClusterQueue][r] += e.sign * amt
		}
		if e.sign > 0 {
			out = append(out, t.excess(usage, w.ClusterQueue, e.rv)...)
		}
	}
	return out, nil
}

// excess describes how usage exceeds ClusterQueue cq's or its cohort's
// quota, if it does.
func (t *tracker) excess(usage [][]int64, cq int, rv uint64) []string {
	var out []string
	l := t.limits[cq]
	for r, used := range usage[cq] {
		if l.capacity[r] >= 0 && used > l.capacity[r] {
			out = append(out, fmt.Sprintf("at revision %d ClusterQueue %s used %d milli-units of resource %d, limit %d",
				rv, t.cqs[cq].Name, used, r, l.capacity[r]))
		}
		var borrowed, pool int64
		for _, m := range t.cohorts[t.cqs[cq].Cohort] {
			ml := t.limits[m]
			borrowed += max(usage[m][r]-ml.guaranteed[r], 0)
			pool += ml.nominal[r] - ml.guaranteed[r]
		}
		if borrowed > pool {
			out = append(out, fmt.Sprintf("at revision %d cohort %s had %d milli-units of resource %d lent out, pool %d",
				rv, t.cqs[cq].Cohort, borrowed, r, pool))
		}
	}
	return out
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
