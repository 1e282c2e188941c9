package chart

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// KubeVersion is the Kubernetes version a render assumes: the one berth
// is built and tested against.
const KubeVersion = "v1.37.2"

// DefaultAPIVersions are the APIs a render assumes besides Kubernetes'
// own: prometheus-operator's, so that metrics.serviceMonitor and
// metrics.prometheusRule render, and cert-manager's.
var DefaultAPIVersions = []string{
	"monitoring.coreos.com/v1",
	"monitoring.coreos.com/v1/ServiceMonitor",
	"monitoring.coreos.com/v1/PrometheusRule",
	"cert-manager.io/v1",
	"cert-manager.io/v1/Certificate",
	"cert-manager.io/v1/Issuer",
}

// RenderOptions are what `helm template` takes.
type RenderOptions struct {
	// Chart is a chart directory or a packaged .tgz.
	Chart string
	// Namespace and ReleaseName are the release's.
	Namespace, ReleaseName string
	// ValueFiles (-f) and Set (--set key=value) as helm reads them, later
	// ones winning.
	ValueFiles, Set []string
	// Values, when not nil, are merged over ValueFiles and Set: for tests
	// that build values in Go.
	Values map[string]any
	// ExtraAPIVersions are available besides DefaultAPIVersions.
	ExtraAPIVersions []string
	// NoDefaultAPIVersions leaves DefaultAPIVersions out: a cluster with
	// only Kubernetes' APIs (and ExtraAPIVersions).
	NoDefaultAPIVersions bool
}

// Render renders the chart as `helm template` does, client-side: values
// checked against values.schema.json, templates executed, manifests in
// Helm's install order, one YAML stream. The chart's NOTES are not part
// of it.
func Render(o RenderOptions) ([]byte, error) {
	ch, err := Load(o.Chart)
	if err != nil {
		return nil, err
	}
	vals, err := (&values.Options{ValueFiles: o.ValueFiles, Values: o.Set}).MergeValues(getter.Getters())
	if err != nil {
		return nil, fmt.Errorf("reading values: %w", err)
	}
	if o.Values != nil {
		vals = chartutil.CoalesceTables(deepCopy(o.Values), vals)
	}
	return renderChart(ch, o, vals)
}

// renderChart renders an already loaded chart with vals (Chart, ValueFiles
// and Set of o are not read).
func renderChart(ch *chart.Chart, o RenderOptions, vals map[string]any) ([]byte, error) {
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("kube version %s: %w", KubeVersion, err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.DryRunOption = "client"
	install.ClientOnly = true
	install.Replace = true
	install.KubeVersion = kv
	if !o.NoDefaultAPIVersions {
		install.APIVersions = append(install.APIVersions, DefaultAPIVersions...)
	}
	install.APIVersions = append(install.APIVersions, o.ExtraAPIVersions...)
	install.Namespace = o.Namespace
	install.ReleaseName = o.ReleaseName
	rel, err := install.RunWithContext(context.Background(), ch, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", ch.Name(), err)
	}
	docs := releaseutil.SplitManifests(rel.Manifest)
	var b strings.Builder
	for _, doc := range orderForApply(docs) {
		b.WriteString("---\n")
		b.WriteString(strings.TrimSpace(doc))
		b.WriteString("\n")
	}
	for _, h := range rel.Hooks {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, strings.TrimSpace(h.Manifest))
	}
	return []byte(b.String()), nil
}

// orderForApply returns the documents (SplitManifests' map, keyed in
// Helm's install order) with the Namespace first and the CRDs next, as in
// install.yaml: the order a plain `kubectl apply -f` of the file needs.
// Helm's own order puts a PodDisruptionBudget, ServiceAccount and Secret
// before the CRDs, which only Helm's installer copes with.
func orderForApply(docs map[string]string) []string {
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	// SplitManifests names the documents manifest-0, manifest-1, ...
	index := func(k string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(k, "manifest-"))
		return n
	}
	rank := func(k string) int {
		var head struct{ Kind string }
		_ = yaml.Unmarshal([]byte(docs[k]), &head)
		switch head.Kind {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		default:
			return 2
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
			return ri < rj
		}
		return index(keys[i]) < index(keys[j])
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = docs[k]
	}
	return out
}

// deepCopy copies nested maps and slices, so that coalescing (which
// writes into its arguments) leaves the caller's values alone.
func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopy(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	default:
		return v
	}
}
