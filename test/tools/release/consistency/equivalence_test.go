package consistency

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/test/tools/release/manifest"
)

// TestChartRendersTheBundle: for each setting that both installs support,
// the bundle (kustomize: config/default, or an overlay of it) and the
// released chart (helm: values) give the same objects — the same set of
// kind, namespace and name, and equal content field by field.
//
// The one normalisation: the chart renders the Namespace only with
// namespace.create=true, so with its defaults the bundle's Namespace is the
// one object expected on the bundle side only (onlyInBundle). Nothing else
// is dropped or rewritten: the chart adds no labels of its own (Helm
// records a release by annotations and a label it adds when it installs,
// not in the templates), and its CRDs, ClusterRole, Role and webhook
// configurations are generated from the bundle's build.
func TestChartRendersTheBundle(t *testing.T) {
	cases := []struct {
		name string
		// overlay, when set, are kustomization fields over config/default.
		overlay string
		// namespace is the bundle's (kustomize namespace) and the chart's
		// (the release namespace); empty is berth-system.
		namespace string
		// image is the bundle's (berth-release bundle --image); empty is
		// testImage.
		image        string
		values       map[string]any
		onlyInBundle []manifest.Key
	}{{
		name:         "defaults",
		onlyInBundle: []manifest.Key{{APIVersion: "v1", Kind: "Namespace", Name: "berth-system"}},
	}, {
		name:   "defaults, namespace created",
		values: map[string]any{"namespace": map[string]any{"create": true}},
	}, {
		name:      "another namespace",
		namespace: "gpu-queues",
		values:    map[string]any{"namespace": map[string]any{"create": true}},
	}, {
		name:    "three replicas",
		overlay: "replicas:\n- name: berth-controller\n  count: 3\n",
		values:  map[string]any{"replicas": 3, "namespace": map[string]any{"create": true}},
	}, {
		name:  "image from a mirror",
		image: "mirror.example.com/berth/berth-controller:" + testVersion + "@" + testDigest,
		values: map[string]any{
			"image":     map[string]any{"repository": "mirror.example.com/berth/berth-controller"},
			"namespace": map[string]any{"create": true},
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := configDir(t)
			if c.overlay != "" {
				dir = overlay(t, c.overlay)
			}
			ns := c.namespace
			if ns == "" {
				ns = "berth-system"
			}
			b := index(t, build(t, dir, c.namespace, c.image))
			for _, k := range c.onlyInBundle {
				if _, ok := b[k]; !ok {
					t.Fatalf("%s is not in the bundle", k)
				}
				delete(b, k)
			}
			if d := diff(b, index(t, render(t, ns, c.values))); len(d) > 0 {
				t.Errorf("bundle and chart differ:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestDiffSeesAChange guards the test above: one changed value is one
// reported difference, in the object it belongs to.
func TestDiffSeesAChange(t *testing.T) {
	b := index(t, build(t, configDir(t), "", ""))
	delete(b, manifest.Key{APIVersion: "v1", Kind: "Namespace", Name: "berth-system"})
	d := diff(b, index(t, render(t, "berth-system", map[string]any{"replicas": 4})))
	if len(d) != 1 || !strings.HasPrefix(d[0], "Deployment berth-system/berth-controller") || !strings.Contains(d[0], "replicas") {
		t.Errorf("want one difference, in the Deployment's replicas; got:\n%s", strings.Join(d, "\n"))
	}
}
