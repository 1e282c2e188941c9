package admission

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Flavors the pods' own node constraints rule out. A flavor's node labels
// (FlavorQuotas.NodeLabels) are what every node of the flavor carries, and what
// berth adds to the node selector of the pods it admits on it. A pod set
// whose own node selector or required node affinity contradicts them — a
// replica pinned to gpu.product=NVIDIA-H100 in a queue whose first flavor
// is labelled gpu.product=NVIDIA-A100 — could never run on that flavor's
// nodes: admitted there, its pods would be held (their selector conflicts
// with the admission's) or run on nodes of another flavor than the one
// charged. So a flavor is open to a workload in a resource group only if
// every pod set requesting a resource of the group admits a node carrying
// the flavor's labels (NodeFilter.AdmitsFlavor), judged on the keys the
// flavor sets: a key the flavor does not set may have any value on its
// nodes, so it rules nothing out.
//
// Flavor choice, preemption (which flavor victims are sought in) and the
// fallback of a topology gang all pass over closed flavors, through
// fitsFlavor and withinMax. A workload no flavor of a group is open to
// waits with NoMatchingFlavor until its queue, a flavor's labels or the
// workload change.

// flavorNodes is what a queue knows of one of its flavors' nodes for
// flavor choice: its node labels (FlavorQuotas.NodeLabels, given with the
// queue, so a flavor is never judged on labels the engine was not told),
// and a cache of which pod set filters they admit, by filterHash. A queue
// upserted again compiles new ones.
type flavorNodes struct {
	labels map[string]string
	open   map[uint64]bool
}

// newFlavorNodes is a flavor's node labels, nil when it has none.
func newFlavorNodes(labels map[string]string) *flavorNodes {
	if len(labels) == 0 {
		return nil
	}
	return &flavorNodes{labels: maps.Clone(labels)}
}

// admits reports, with a cache per filter, whether the pods of pod set ps
// may run on the flavor's nodes.
func (fn *flavorNodes) admits(ps *podSetSpec) bool {
	if fn == nil || ps.filterHash == 0 {
		return true
	}
	if ok, hit := fn.open[ps.filterHash]; hit {
		return ok
	}
	ok := ps.nodes.AdmitsFlavor(fn.labels)
	remember(&fn.open, ps.filterHash, ok)
	return ok
}

// hashFilter is a filter key's cache key: a hash seeded per engine, so
// that no tenant can write two constraints that collide, computed once
// when the workload is compiled (keys run to kilobytes; a cycle looks them
// up per flavor and per preemption candidate). 0 for no constraints.
func (nm *names) hashFilter(key string) uint64 {
	if key == "" {
		return 0
	}
	return max(maphash.String(nm.filterSeed, key), 1)
}

// filtered reports whether some pod set of w has node constraints of its
// own (compileWorkload sets w.filtered from it).
func filtered(podSets []podSetSpec) bool {
	return slices.ContainsFunc(podSets, func(ps podSetSpec) bool { return ps.filterHash != 0 })
}

// opens reports whether flavor f of group gi is open to w: every pod set of
// w requesting a resource of the group may run on the flavor's nodes.
func (c *cqState) opens(w *wl, gi int, f int32) bool {
	if !w.filtered {
		return true
	}
	for _, fs := range c.groups[gi].flavors {
		if fs.id == f {
			return fs.openTo(c, w, gi)
		}
	}
	return true
}

// openTo reports whether the flavor is open to w in group gi.
func (fs flavorState) openTo(c *cqState, w *wl, gi int) bool {
	if fs.nodes == nil || !w.filtered {
		return true
	}
	for i := range w.podSets {
		ps := &w.podSets[i]
		if ps.filterHash != 0 && c.podSetRequestsGroup(ps, gi) && !fs.nodes.admits(ps) {
			return false
		}
	}
	return true
}

// podSetRequestsGroup reports whether ps requests a resource of group gi.
func (c *cqState) podSetRequestsGroup(ps *podSetSpec, gi int) bool {
	for _, r := range ps.req {
		if g, ok := c.resGroup[r.res]; ok && g == gi {
			return true
		}
	}
	return false
}

// firstOpen is the first flavor of group gi open to w, or the group's first
// when none is: where an estimate charges w.
func (c *cqState) firstOpen(w *wl, gi int) flavorState {
	for _, fs := range c.groups[gi].flavors {
		if fs.openTo(c, w, gi) {
			return fs
		}
	}
	return c.groups[gi].flavors[0]
}

// anyOpen reports whether some flavor of group gi is open to w.
func (c *cqState) anyOpen(w *wl, gi int) bool {
	if !w.filtered {
		return true
	}
	return slices.ContainsFunc(c.groups[gi].flavors, func(fs flavorState) bool { return fs.openTo(c, w, gi) })
}

// msgNoMatchingFlavor says which flavors' labels the pods' constraints rule
// out and what to change, then the constraints, each cut short: a status
// message is truncated, and a long affinity must not push out the advice.
func (nm *names) msgNoMatchingFlavor(c *cqState, w *wl, gi int) string {
	flavors := make([]string, 0, len(c.groups[gi].flavors))
	for _, fs := range c.groups[gi].flavors {
		flavors = append(flavors, fs.name+" ("+describeLabels(fs.nodes)+")")
	}
	var pods []string
	for i := range w.podSets {
		ps := &w.podSets[i]
		if ps.filterHash != 0 && c.podSetRequestsGroup(ps, gi) {
			pods = append(pods, "pod set "+ps.name+": "+cut(ps.nodes.String(), maxConstraintNote))
		}
	}
	return "no flavor of ClusterQueue \"" + c.name + "\" for " + nm.groupResources(c, w, gi) + " has nodes the pods may run on (flavors " +
		strings.Join(flavors, ", ") + "): change the pods' node selector or affinity, or add a flavor whose nodeLabels they match; " +
		strings.Join(pods, "; ")
}

// maxConstraintNote bounds one pod set's constraints in a message.
const maxConstraintNote = 200

// cut shortens s to at most n bytes, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// groupResources names the resources of group gi that w requests.
func (nm *names) groupResources(c *cqState, w *wl, gi int) string {
	var out []string
	for _, r := range w.req {
		if c.resGroup[r.res] == gi {
			out = append(out, string(nm.resources[r.res]))
		}
	}
	return strings.Join(out, ", ")
}

// describeLabels formats a flavor's node labels, sorted: "gpu.product=A100".
func describeLabels(fn *flavorNodes) string {
	if fn == nil || len(fn.labels) == 0 {
		return "no node labels"
	}
	kv := make([]string, 0, len(fn.labels))
	for _, k := range slices.Sorted(maps.Keys(fn.labels)) {
		kv = append(kv, k+"="+fn.labels[k])
	}
	return strings.Join(kv, ",")
}
