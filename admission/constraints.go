package admission

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The pods' own constraints. A flavor says which nodes a workload's pods may
// use as far as quota goes; the pods themselves may narrow that — a node
// selector or required node affinity of their own, a preference among nodes,
// or a rule that pods of the gang must not share a node (required pod
// anti-affinity on the hostname, one pod per node). The engine honours them
// wherever it places pods (topology domains and bookings): a node, or a
// pool's new node, counts for a pod set only if the pod set's NodeFilter
// admits it; a preference ranks the domains that can take the gang; and
// pod sets kept apart never share a node in the plan.
//
// The engine does not interpret Kubernetes types: the caller implements
// NodeFilter (with the scheduler's own matching rules) and says which pod
// sets must be kept apart.

// NodeFilter narrows the nodes of its flavor a pod set's pods may be bound
// to. Implementations must be deterministic: the engine caches Admits per
// node and Key.
type NodeFilter interface {
	// Key identifies what the filter admits: filters with equal keys admit
	// the same nodes and score them the same. "" admits every node.
	Key() string
	// Admits reports whether the pods may be bound to the named node with
	// these labels; the name is "" for a node a pool has yet to create.
	Admits(name string, labels map[string]string) bool
	// AdmitsFlavor reports whether the pods may run on a node that carries
	// these labels — a flavor's node labels, which are some of its nodes'
	// labels, not all: a constraint on a key the labels do not set is not
	// judged (see flavormatch.go).
	AdmitsFlavor(labels map[string]string) bool
	// Score is the pods' preference for a node with these labels (the sum
	// of the weights of the preferred terms it matches); higher is better.
	Score(labels map[string]string) int64
	// String describes the constraint for messages, e.g.
	// "nodeSelector gpu.product=NVIDIA-H200".
	String() string
}

// filterKey is the cache key of a pod set's filter; "" when it has none.
func (ps *podSetSpec) filterKey() string {
	if ps.nodes == nil {
		return ""
	}
	return ps.nodes.Key()
}

// admitsLabels reports, with a cache per filter key, whether the pod set's
// filter admits a node or pool with these labels.
func (ps *podSetSpec) admitsLabels(name string, labels map[string]string, cache *map[string]bool) bool {
	key := ps.filterKey()
	if key == "" {
		return true
	}
	if ok, hit := (*cache)[key]; hit {
		return ok
	}
	ok := ps.nodes.Admits(name, labels)
	remember(cache, key, ok)
	return ok
}

// filterCacheMax bounds a cache of filter matches. Its keys are the pods'
// own constraints, which tenants write: without a bound, pods with ever new
// node selectors would grow every node's and flavor's cache without end.
// A full cache starts again empty; matching again is cheap.
const filterCacheMax = 1024

// remember caches a filter's match under key, emptying a full cache first.
func remember[K comparable](cache *map[K]bool, key K, ok bool) {
	if *cache == nil || len(*cache) >= filterCacheMax {
		*cache = map[K]bool{}
	}
	(*cache)[key] = ok
}

// admitsNode reports whether the pod set, placed on flavor tf, may use node
// n: its filter admits the node and it tolerates the node's taints.
func (ps *podSetSpec) admitsNode(tf *topoFlavor, n *topoNode) bool {
	return ps.admitsLabels(n.name, n.labels, &n.fits) && ps.toleratesAll(tf, n.taints)
}

// admitsPool reports whether the pod set, placed on flavor tf, may use a new
// node of pool p: its filter admits the pool's labels and it tolerates the
// taints of the pool's template.
func (ps *podSetSpec) admitsPool(tf *topoFlavor, p *topoPool) bool {
	return ps.admitsLabels("", p.labels, &p.fits) && ps.toleratesAll(tf, p.taints)
}

// score is the pod set's preference for a node with these labels.
func (ps *podSetSpec) score(labels map[string]string) int64 {
	if ps.filterKey() == "" {
		return 0
	}
	return ps.nodes.Score(labels)
}

// admitsAny reports whether some pod set of w, placed on flavor tf, may use
// node n.
func (w *wl) admitsAny(tf *topoFlavor, n *topoNode) bool {
	for i := range w.podSets {
		if w.podSets[i].admitsNode(tf, n) {
			return true
		}
	}
	return false
}

// apartRoom caps k pods of pod set i on a node that already holds onNode
// pods of each pod set of the gang: none when a pod set kept apart from i is
// there, at most one in all when i is kept apart from itself.
func (w *wl) apartRoom(i int, onNode []int32, k int32) int32 {
	for _, j := range w.podSets[i].apart {
		switch {
		case j == i:
			k = min(k, max(0, 1-onNode[i]))
		case onNode[j] > 0:
			return 0
		}
	}
	return k
}

// compileApart resolves the pod sets each pod set is kept apart from into
// indices, and makes the relation symmetric (as the scheduler enforces
// required anti-affinity both ways).
func compileApart(sets []PodSet, specs []podSetSpec) error {
	for i, ps := range sets {
		for _, name := range ps.Apart {
			j := slices.IndexFunc(sets, func(s PodSet) bool { return s.Name == name })
			if j < 0 {
				return fmt.Errorf("podSets[%d] %q: apart names pod set %q, which the workload does not have", i, ps.Name, name)
			}
			for _, p := range [][2]int{{i, j}, {j, i}} {
				if !slices.Contains(specs[p[0]].apart, p[1]) {
					specs[p[0]].apart = append(specs[p[0]].apart, p[1])
				}
			}
		}
	}
	for i := range specs {
		slices.Sort(specs[i].apart)
	}
	return nil
}

// sameConstraints reports whether two pod sets have the same filter and
// tolerations and are kept apart from the same pod sets.
func sameConstraints(a, b podSetSpec) bool {
	return a.filterKey() == b.filterKey() && slices.Equal(a.apart, b.apart) && sameTolerations(a, b)
}

// validateFilter rejects a filter whose description is empty: messages must
// say what the pods ask for.
func validateFilter(f NodeFilter) error {
	if f == nil || f.Key() == "" {
		return nil
	}
	if f.String() == "" {
		return errors.New("nodes: a filter with a key must describe itself")
	}
	return nil
}

// constraintNote describes the pods' own constraints for a message, "" when
// there are none.
func (w *wl) constraintNote() string {
	var parts []string
	for i := range w.podSets {
		ps := &w.podSets[i]
		var what []string
		if ps.filterKey() != "" {
			what = append(what, ps.nodes.String())
		}
		if slices.Contains(ps.apart, i) {
			what = append(what, "one pod per node")
		}
		if len(what) > 0 {
			parts = append(parts, "pod set "+ps.name+": "+strings.Join(what, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " on the nodes its pods' own constraints allow (" + strings.Join(parts, "; ") + ")"
}

// admitsAnyPool reports whether some pod set of w, placed on flavor tf, may
// use a new node of p.
func (w *wl) admitsAnyPool(tf *topoFlavor, p *topoPool) bool {
	for i := range w.podSets {
		if w.podSets[i].admitsPool(tf, p) {
			return true
		}
	}
	return false
}
