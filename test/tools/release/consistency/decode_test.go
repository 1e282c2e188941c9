package consistency

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/test/tools/release/manifest"
)

// Kinds the tests cannot decode into Go types, because their types live in
// other projects (prometheus-operator, cert-manager); the tests above
// check their fields one by one.
var foreignKinds = map[string]bool{"ServiceMonitor": true, "PrometheusRule": true, "Certificate": true, "Issuer": true}

// TestObjectsDecodeStrictly decodes every object of the bundle and of the
// chart (with everything turned on) into its Kubernetes Go type, strictly:
// an unknown or duplicate field — a typo the API server would drop or, with
// server-side apply's field validation, reject — fails.
func TestObjectsDecodeStrictly(t *testing.T) {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiregistrationv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true, Strict: true})
	everything := map[string]any{
		"namespace":           map[string]any{"create": true},
		"metrics":             map[string]any{"readers": []any{map[string]any{"name": "prometheus", "namespace": "monitoring"}}},
		"priorityClassName":   "system-cluster-critical",
		"tolerations":         []any{map[string]any{"key": "dedicated", "operator": "Exists"}},
		"nodeSelector":        map[string]any{"pool": "system"},
		"imagePullSecrets":    []any{map[string]any{"name": "regcred"}},
		"podDisruptionBudget": map[string]any{"minAvailable": "50%"},
	}
	installs := map[string][]*unstructured.Unstructured{
		"bundle":              build(t, configDir(t), "", ""),
		"chart":               render(t, "berth-system", everything),
		"chart, cert-manager": render(t, "berth-system", map[string]any{"certManagement": "cert-manager"}),
	}
	for name, objs := range installs {
		t.Run(name, func(t *testing.T) {
			for _, o := range objs {
				if foreignKinds[o.GetKind()] {
					continue
				}
				b, err := yaml.Marshal(o.Object)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := strict.Decode(b, nil, nil); err != nil {
					t.Errorf("%s: %v", manifest.KeyOf(o), err)
				}
			}
		})
	}
}
