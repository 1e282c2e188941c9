package lifecycle

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// podNodes is a pod set's own node constraints, matched with
// kube-scheduler's rules (k8s.io/component-helpers): its node selector and
// required node affinity admit nodes, its preferred node affinity scores
// them. Taints are not matched here: the engine matches a node's and a
// pool's taints against the pods' own tolerations and those of the flavor
// it places them on (taints.go).
type podNodes struct {
	key       string
	required  nodeaffinity.RequiredNodeAffinity
	preferred *nodeaffinity.PreferredSchedulingTerms
	desc      string
	// selector and terms are the node selector and the required terms as
	// written, which AdmitsFlavor judges key by key.
	selector map[string]string
	terms    []corev1.NodeSelectorTerm
	// unnamed matches a node yet to be created, which has no name: only
	// the required terms that match no field can; nil when none is left.
	unnamed *nodeaffinity.RequiredNodeAffinity
}

var _ admission.NodeFilter = (*podNodes)(nil)

// nodeFilter is the engine's filter for a pod set's template; nil when the
// template constrains nothing.
func nodeFilter(t *berthv1.PodSetTemplate) admission.NodeFilter {
	if t == nil {
		return nil
	}
	var required *corev1.NodeSelector
	var preferred []corev1.PreferredSchedulingTerm
	if na := nodeAffinityOf(t); na != nil {
		required, preferred = na.RequiredDuringSchedulingIgnoredDuringExecution, na.PreferredDuringSchedulingIgnoredDuringExecution
	}
	if len(t.Spec.NodeSelector) == 0 && required == nil && len(preferred) == 0 {
		return nil
	}
	raw, err := json.Marshal(struct {
		S map[string]string                `json:"s,omitempty"`
		R *corev1.NodeSelector             `json:"r,omitempty"`
		P []corev1.PreferredSchedulingTerm `json:"p,omitempty"`
	}{t.Spec.NodeSelector, required, preferred})
	if err != nil {
		raw = fmt.Appendf(nil, "%v", t.Spec.NodeSelector) // API types always encode
	}
	f := &podNodes{key: string(raw), required: nodeaffinity.NewRequiredNodeAffinity(t.Spec.NodeSelector, t.Spec.Affinity)}
	// Invalid terms score nothing, as kube-scheduler skips them; the API
	// server has validated the pods' templates.
	f.preferred, _ = nodeaffinity.NewPreferredSchedulingTerms(preferred)
	f.desc = describeNodes(t.Spec.NodeSelector, required, preferred)
	f.selector = t.Spec.NodeSelector
	if required != nil {
		f.terms = required.NodeSelectorTerms
	}
	f.unnamed = &f.required
	if required != nil && slices.ContainsFunc(required.NodeSelectorTerms, func(t corev1.NodeSelectorTerm) bool { return len(t.MatchFields) > 0 }) {
		f.unnamed = unnamedAffinity(t.Spec.NodeSelector, required)
	}
	return f
}

// unnamedAffinity is the required affinity of terms that match no field.
func unnamedAffinity(selector map[string]string, required *corev1.NodeSelector) *nodeaffinity.RequiredNodeAffinity {
	var terms []corev1.NodeSelectorTerm
	for _, t := range required.NodeSelectorTerms {
		if len(t.MatchFields) == 0 {
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return nil
	}
	a := nodeaffinity.NewRequiredNodeAffinity(selector, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}})
	return &a
}

func nodeAffinityOf(t *berthv1.PodSetTemplate) *corev1.NodeAffinity {
	if t.Spec.Affinity == nil {
		return nil
	}
	return t.Spec.Affinity.NodeAffinity
}

// Key implements admission.NodeFilter.
func (f *podNodes) Key() string { return f.key }

// Admits implements admission.NodeFilter.
func (f *podNodes) Admits(name string, l map[string]string) bool {
	match := &f.required
	if name == "" {
		// The library would match a nameless node to any name.
		if match = f.unnamed; match == nil {
			return false
		}
	}
	ok, err := match.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}})
	return err == nil && ok
}

// AdmitsFlavor implements admission.NodeFilter, as kube-scheduler would
// judge a node that carries the flavor's labels l and, on every other key,
// whatever the pods ask: the node selector's entries and the required
// terms' expressions on keys l sets must match; the rest are not judged.
// Terms are ORed, so a term with nothing left on l's keys admits — unless
// kube-scheduler matches nothing with it whatever the node: an empty term,
// or one it cannot parse.
func (f *podNodes) AdmitsFlavor(l map[string]string) bool {
	for k, v := range f.selector {
		if lv, ok := l[k]; ok && lv != v {
			return false
		}
	}
	if len(f.terms) == 0 {
		return true
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: l}}
	for _, t := range f.terms {
		if len(t.MatchExpressions)+len(t.MatchFields) == 0 {
			continue
		}
		if _, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{t}}); err != nil {
			continue
		}
		var on corev1.NodeSelectorTerm
		for _, e := range t.MatchExpressions {
			if _, ok := l[e.Key]; ok {
				on.MatchExpressions = append(on.MatchExpressions, e)
			}
		}
		if len(on.MatchExpressions) == 0 {
			return true
		}
		sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{on}})
		if err == nil && sel.Match(node) {
			return true
		}
	}
	return false
}

// Score implements admission.NodeFilter.
func (f *podNodes) Score(l map[string]string) int64 {
	if f.preferred == nil {
		return 0
	}
	return f.preferred.Score(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: l}})
}

// String implements admission.NodeFilter.
func (f *podNodes) String() string { return f.desc }

// describeNodes says in a few words what the pods ask of nodes, for pending
// messages: "nodeSelector gpu.product=NVIDIA-H200".
func describeNodes(selector map[string]string, required *corev1.NodeSelector, preferred []corev1.PreferredSchedulingTerm) string {
	var parts []string
	if len(selector) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(selector)) {
			kv = append(kv, k+"="+selector[k])
		}
		parts = append(parts, "nodeSelector "+strings.Join(kv, ","))
	}
	if required != nil {
		var terms []string
		for _, t := range required.NodeSelectorTerms {
			terms = append(terms, describeTerm(t))
		}
		parts = append(parts, "required node affinity "+strings.Join(terms, " or "))
	}
	if len(preferred) > 0 {
		parts = append(parts, fmt.Sprintf("%d preferred node affinity terms", len(preferred)))
	}
	return strings.Join(parts, ", ")
}

func describeTerm(t corev1.NodeSelectorTerm) string {
	var reqs []string
	for _, r := range t.MatchExpressions {
		reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
	}
	for _, r := range t.MatchFields {
		reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
	}
	return "(" + strings.Join(reqs, " and ") + ")"
}

// apartOf names the pod sets of the gang whose pods a pod set's pods must
// not share a node with: those its required pod anti-affinity on the
// hostname selects (in the gang's namespace). Anti-affinity on coarser
// levels, and against pods outside the gang, is left to kube-scheduler.
func apartOf(ns string, t *berthv1.PodSetTemplate, sets []berthv1.PodSet) []string {
	if t == nil || t.Spec.Affinity == nil || t.Spec.Affinity.PodAntiAffinity == nil {
		return nil
	}
	var out []string
	for _, term := range t.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelHostname || term.NamespaceSelector != nil ||
			(len(term.Namespaces) > 0 && !slices.Contains(term.Namespaces, ns)) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || term.LabelSelector == nil {
			continue // selects nothing, as for kube-scheduler
		}
		for _, ps := range sets {
			if ps.Template != nil && sel.Matches(labels.Set(ps.Template.Labels)) && !slices.Contains(out, ps.Name) {
				out = append(out, ps.Name)
			}
		}
	}
	return out
}
