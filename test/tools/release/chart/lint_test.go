package chart

import (
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestHelmLint runs `helm lint --strict` on the chart source: Chart.yaml,
// values against the schema, every template rendered and parsed as YAML,
// deprecated APIs. Only informational messages (such as a missing icon)
// are allowed.
func TestHelmLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults":     nil,
		"cert-manager": {"certManagement": "cert-manager", "namespace": map[string]any{"create": true}},
	} {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = "berth-system"
			result := lint.Run([]string{chartDir}, vals)
			for _, m := range result.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
			for _, err := range result.Errors {
				t.Errorf("helm lint: %v", err)
			}
		})
	}
}
