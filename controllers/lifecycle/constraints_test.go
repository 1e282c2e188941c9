package lifecycle

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

const product = "nvidia.com/gpu.product"

func affinityTemplate(sel map[string]string, a *corev1.Affinity) *berthv1.PodSetTemplate {
	return &berthv1.PodSetTemplate{Labels: map[string]string{"app": "train"}, Spec: corev1.PodSpec{NodeSelector: sel, Affinity: a}}
}

func requiredIn(key string, values ...string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
}

func TestNodeFilter(t *testing.T) {
	h200 := map[string]string{product: "NVIDIA-H200"}
	h100 := map[string]string{product: "NVIDIA-H100"}
	byName := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}}}
	prefer := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 7, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: product, Operator: corev1.NodeSelectorOpIn, Values: []string{"NVIDIA-H200"}}}}}}}}
	tests := []struct {
		name     string
		t        *berthv1.PodSetTemplate
		none     bool
		node     string
		labels   map[string]string
		admits   bool
		score    int64
		wantDesc string
	}{
		{name: "no template", t: nil, none: true},
		{name: "a template that constrains nothing", t: affinityTemplate(nil, nil), none: true},
		{name: "node selector admits", t: affinityTemplate(h200, nil), labels: h200, admits: true, wantDesc: "nodeSelector nvidia.com/gpu.product=NVIDIA-H200"},
		{name: "node selector rejects", t: affinityTemplate(h200, nil), labels: h100},
		{name: "required affinity In", t: affinityTemplate(nil, requiredIn(product, "NVIDIA-H200", "NVIDIA-B200")), labels: h200, admits: true,
			wantDesc: "required node affinity (nvidia.com/gpu.product In [NVIDIA-H200 NVIDIA-B200])"},
		{name: "required affinity rejects", t: affinityTemplate(nil, requiredIn(product, "NVIDIA-B200")), labels: h200},
		{name: "a field term matches the node's name", t: affinityTemplate(nil, byName), node: "n1", admits: true},
		{name: "a field term rejects a node yet to be created", t: affinityTemplate(nil, byName), node: ""},
		{name: "preferred terms score and admit all", t: affinityTemplate(nil, prefer), labels: h200, admits: true, score: 7, wantDesc: "1 preferred node affinity terms"},
		{name: "preferred terms: no match scores 0", t: affinityTemplate(nil, prefer), labels: h100, admits: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := nodeFilter(tc.t)
			if tc.none {
				if f != nil {
					t.Fatalf("got filter %q, want none", f.Key())
				}
				return
			}
			if got := f.Admits(tc.node, tc.labels); got != tc.admits {
				t.Fatalf("Admits = %v, want %v", got, tc.admits)
			}
			if got := f.Score(tc.labels); got != tc.score {
				t.Fatalf("Score = %d, want %d", got, tc.score)
			}
			if !strings.Contains(f.String(), tc.wantDesc) || f.Key() == "" {
				t.Fatalf("String = %q (key %q), want %q", f.String(), f.Key(), tc.wantDesc)
			}
			if again := nodeFilter(tc.t); again.Key() != f.Key() {
				t.Fatalf("keys differ for the same template: %q, %q", f.Key(), again.Key())
			}
		})
	}
}

// TestNodeFilterAdmitsFlavor: a flavor's labels are judged on their own
// keys only, terms ORed.
func TestNodeFilterAdmitsFlavor(t *testing.T) {
	a100 := map[string]string{product: "NVIDIA-A100", "zone": "z1"}
	terms := func(ts ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts}}}
	}
	expr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	tests := []struct {
		name  string
		sel   map[string]string
		aff   *corev1.Affinity
		admit bool
	}{
		{name: "selector on the flavor's key, same value", sel: map[string]string{product: "NVIDIA-A100"}, admit: true},
		{name: "selector on the flavor's key, another value", sel: map[string]string{product: "NVIDIA-H100"}},
		{name: "selector on a key the flavor does not label", sel: map[string]string{"pool": "team-a"}, admit: true},
		{name: "one entry of two contradicts", sel: map[string]string{"pool": "team-a", "zone": "z2"}},
		{name: "NotIn the flavor's value", aff: terms(expr(product, corev1.NodeSelectorOpNotIn, "NVIDIA-A100"))},
		{name: "DoesNotExist on a key the flavor sets", aff: terms(expr("zone", corev1.NodeSelectorOpDoesNotExist))},
		{name: "Exists on a key the flavor does not set", aff: terms(expr("pool", corev1.NodeSelectorOpExists)), admit: true},
		{name: "terms are ORed: the second matches",
			aff: terms(expr(product, corev1.NodeSelectorOpIn, "NVIDIA-H100"), expr(product, corev1.NodeSelectorOpIn, "NVIDIA-A100", "NVIDIA-H100")), admit: true},
		{name: "terms are ORed: none matches",
			aff: terms(expr(product, corev1.NodeSelectorOpIn, "NVIDIA-H100"), expr("zone", corev1.NodeSelectorOpIn, "z2"))},
		{name: "a term with nothing on the flavor's keys admits", aff: terms(expr(product, corev1.NodeSelectorOpIn, "NVIDIA-H100"), expr("pool", corev1.NodeSelectorOpIn, "x")), admit: true},
		{name: "selector and affinity must both hold", sel: map[string]string{"zone": "z1"}, aff: terms(expr(product, corev1.NodeSelectorOpIn, "NVIDIA-H100"))},
		{name: "an empty term matches nothing, so it leaves no flavor open", aff: terms(corev1.NodeSelectorTerm{}, expr("zone", corev1.NodeSelectorOpIn, "z2"))},
		{name: "a term kube-scheduler cannot parse matches nothing",
			aff: terms(expr("pool", corev1.NodeSelectorOpGt, "not-a-number"), expr("zone", corev1.NodeSelectorOpIn, "z2"))},
		{name: "a term of fields alone leaves the flavor open",
			aff: terms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}), admit: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := nodeFilter(affinityTemplate(tc.sel, tc.aff))
			if f == nil {
				t.Fatal("no filter")
			}
			if got := f.AdmitsFlavor(a100); got != tc.admit {
				t.Fatalf("AdmitsFlavor(%v) = %v, want %v (%s)", a100, got, tc.admit, f)
			}
		})
	}
}

func TestApartOf(t *testing.T) {
	anti := func(key string, sel map[string]string, namespaces ...string) *corev1.Affinity {
		return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}, Namespaces: namespaces}}}}
	}
	sets := func(a *corev1.Affinity) []berthv1.PodSet {
		return []berthv1.PodSet{
			{Name: "leader", Template: &berthv1.PodSetTemplate{Labels: map[string]string{"role": "leader", "job": "x"}, Spec: corev1.PodSpec{Affinity: a}}},
			{Name: "workers", Template: &berthv1.PodSetTemplate{Labels: map[string]string{"role": "worker", "job": "x"}}},
		}
	}
	tests := []struct {
		name string
		a    *corev1.Affinity
		want []string
	}{
		{name: "one pod per node of its own pod set", a: anti(corev1.LabelHostname, map[string]string{"role": "leader"}), want: []string{"leader"}},
		{name: "a selector of the whole job keeps every pod set apart", a: anti(corev1.LabelHostname, map[string]string{"job": "x"}), want: []string{"leader", "workers"}},
		{name: "a coarser level is left to the scheduler", a: anti(corev1.LabelTopologyZone, map[string]string{"job": "x"})},
		{name: "another namespace's pods are not the gang", a: anti(corev1.LabelHostname, map[string]string{"job": "x"}, "other")},
		{name: "the gang's namespace named explicitly", a: anti(corev1.LabelHostname, map[string]string{"role": "worker"}, "ns"), want: []string{"workers"}},
		{name: "no anti-affinity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sets(tc.a)
			if got := apartOf("ns", s[0].Template, s); !slices.Equal(got, tc.want) {
				t.Fatalf("apart = %v, want %v", got, tc.want)
			}
		})
	}
}
