package admission

import (
	"fmt"
	"slices"
	"strings"
)

// Taints and tolerations. A node's taints, and the taints a pool's template
// gives every node it creates, keep off the pods that do not tolerate them.
// The engine honours them as kube-scheduler's TaintToleration filter does:
// only NoSchedule and NoExecute taints exclude (PreferNoSchedule only ranks,
// and the engine ignores it), and a pod tolerates a taint when one of its
// tolerations matches it. A pod set's tolerations are its pods' own plus
// those of the flavor it is placed on (a flavor's tolerations are added to
// the pods released on it), so a node or pool whose taints the flavor
// tolerates is open to every pod set placed on that flavor.
//
// A node or pool whose taints a pod set does not tolerate counts as no
// capacity for it — neither free capacity nor capacity that could be
// created — in every domain, so that a gang is never pinned to, or booked
// in, a domain whose nodes the scheduler, or the autoscaler's template
// check, would refuse it.

// TaintEffect is what a taint does to pods that do not tolerate it.
type TaintEffect string

const (
	// TaintNoSchedule keeps new pods that do not tolerate the taint off the node.
	TaintNoSchedule TaintEffect = "NoSchedule"
	// TaintPreferNoSchedule only ranks the node lower; it excludes nothing.
	TaintPreferNoSchedule TaintEffect = "PreferNoSchedule"
	// TaintNoExecute keeps pods off the node and evicts those already there.
	TaintNoExecute TaintEffect = "NoExecute"
)

// Taint is a node's (or a pool template's) taint.
type Taint struct {
	// Key of the taint.
	Key string
	// Value of the taint; may be empty.
	Value string
	// Effect of the taint.
	Effect TaintEffect
}

// String formats the taint as kubectl does: key=value:Effect.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// TolerationOperator says how a toleration's value is compared.
type TolerationOperator string

const (
	// TolerationEqual matches a taint of the same value ("" means Equal).
	TolerationEqual TolerationOperator = "Equal"
	// TolerationExists matches a taint of any value.
	TolerationExists TolerationOperator = "Exists"
)

// Toleration is one toleration of a pod set (its tolerationSeconds does not
// matter for placement).
type Toleration struct {
	// Key of the taints it matches; "" matches every key.
	Key string
	// Operator is Equal ("" too) or Exists; any other matches nothing.
	Operator TolerationOperator
	// Value compared with Equal.
	Value string
	// Effect of the taints it matches; "" matches every effect.
	Effect TaintEffect
}

// Tolerates reports whether the toleration matches the taint, with
// kube-scheduler's rules (corev1.Toleration.ToleratesTaint).
func (t Toleration) Tolerates(taint Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", TolerationEqual:
		return t.Value == taint.Value
	case TolerationExists:
		return true
	default:
		return false
	}
}

// excludes reports whether a taint keeps pods that do not tolerate it off a
// node.
func (t Taint) excludes() bool { return t.Effect == TaintNoSchedule || t.Effect == TaintNoExecute }

// compileTaints keeps the taints that exclude, sorted and without
// duplicates, so that an unchanged set compares equal; nil when none.
func compileTaints(taints []Taint) []Taint {
	var out []Taint
	for _, t := range taints {
		if t.excludes() {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, compareTaints)
	return slices.Compact(out)
}

func compareTaints(a, b Taint) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := strings.Compare(a.Value, b.Value); c != 0 {
		return c
	}
	return strings.Compare(string(a.Effect), string(b.Effect))
}

// tolerated reports whether one of tols matches the taint.
func tolerated(tols []Toleration, t Taint) bool {
	return slices.ContainsFunc(tols, func(tol Toleration) bool { return tol.Tolerates(t) })
}

// untolerated is the first of taints that neither the pod set's own
// tolerations nor the flavor's match; ok is false when it tolerates all.
func (ps *podSetSpec) untolerated(tf *topoFlavor, taints []Taint) (Taint, bool) {
	for _, t := range taints {
		if tolerated(ps.tols, t) || (tf != nil && tolerated(tf.tols, t)) {
			continue
		}
		return t, true
	}
	return Taint{}, false
}

// toleratesAll reports whether the pod set, placed on flavor tf, tolerates
// every taint.
func (ps *podSetSpec) toleratesAll(tf *topoFlavor, taints []Taint) bool {
	if len(taints) == 0 {
		return true
	}
	_, bad := ps.untolerated(tf, taints)
	return !bad
}

// sameTolerations reports whether two pod sets tolerate the same taints.
func sameTolerations(a, b podSetSpec) bool { return slices.Equal(a.tols, b.tols) }

// taintNote describes, for a message, the domains of level l (the whole
// flavor when l < 0) where taints the gang does not tolerate keep it off
// nodes or pools its own constraints would allow; "" when none do. At most
// three domains are named.
func (w *wl) taintNote(tf *topoFlavor, l int, withPools bool) string {
	const most = 3
	var parts []string
	more := 0
	for _, key := range domainsOf(tf, l, withPools) {
		part := w.domainTaints(tf, key, withPools)
		if part == "" {
			continue
		}
		if len(parts) == most {
			more++
			continue
		}
		where := "flavor"
		if l >= 0 {
			where = tf.levels[l] + "=" + key[l]
		}
		parts = append(parts, where+": "+part)
	}
	if len(parts) == 0 {
		return ""
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more domain(s)", more))
	}
	return "; taints exclude capacity: " + strings.Join(parts, "; ") + " (add a toleration to the pods, or to the flavor)"
}

// domainTaints says which of the domain's nodes and pools carry taints that
// keep every pod set of w off them although the pods' own constraints admit
// them; "" when none do.
func (w *wl) domainTaints(tf *topoFlavor, key []string, withPools bool) string {
	var taints []string
	nodes, pools := false, false
	note := func(labelsOK func(ps *podSetSpec) bool, tt []Taint) bool {
		var found []string
		for i := range w.podSets {
			ps := &w.podSets[i]
			if !labelsOK(ps) {
				continue
			}
			t, bad := ps.untolerated(tf, tt)
			if !bad {
				return false // some pod set may use it
			}
			found = append(found, t.String())
		}
		for _, s := range found {
			if !slices.Contains(taints, s) {
				taints = append(taints, s)
			}
		}
		return len(found) > 0
	}
	for _, n := range tf.nodesIn(key) {
		if len(n.taints) > 0 && note(func(ps *podSetSpec) bool { return ps.admitsLabels(n.name, n.labels, &n.fits) }, n.taints) {
			nodes = true
		}
	}
	if withPools {
		for _, p := range tf.pools {
			if len(p.taints) > 0 && inDomain(tf, p.labels, key) &&
				note(func(ps *podSetSpec) bool { return ps.admitsLabels("", p.labels, &p.fits) }, p.taints) {
				pools = true
			}
		}
	}
	var who string
	switch {
	case nodes && pools:
		who = "nodes and pool carry"
	case nodes:
		who = "nodes carry"
	case pools:
		who = "pool carries"
	default:
		return ""
	}
	slices.Sort(taints)
	noun := "taint"
	if len(taints) > 1 {
		noun = "taints"
	}
	return fmt.Sprintf("%s %s %s that the pods do not tolerate", who, noun, strings.Join(taints, ", "))
}
