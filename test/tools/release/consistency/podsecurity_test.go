package consistency

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestPodSecurityRestricted evaluates the controller's pod template as the
// API server's Pod Security admission would in a namespace enforcing
// "restricted" at the latest version — with the admission plugin's own
// checks (k8s.io/pod-security-admission), not a list of fields — for the
// bundle and for the chart in its modes. It also checks that the bundle's
// Namespace (and the chart's, with namespace.create) enforces that level.
func TestPodSecurityRestricted(t *testing.T) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	installs := map[string][]*unstructured.Unstructured{
		"bundle":                   build(t, configDir(t), "", ""),
		"chart":                    render(t, "berth-system", map[string]any{"namespace": map[string]any{"create": true}}),
		"chart with cert-manager":  render(t, "berth-system", map[string]any{"certManagement": "cert-manager"}),
		"chart with pod settings":  render(t, "berth-system", nil, "priorityClassName=system-cluster-critical", "podLabels.team=ml"),
		"chart with other ports":   render(t, "berth-system", nil, "webhook.port=10443", "metrics.port=9090", "healthProbe.port=9091"),
		"chart with a certificate": render(t, "berth-system", nil, "webhook.certDir=/var/run/berth/certs"),
	}
	t.Run("the check bites", func(t *testing.T) {
		pod := controller(t, installs["bundle"]).Spec.Template
		pod.Spec.SecurityContext = nil
		pod.Spec.Containers[0].SecurityContext = nil
		if policy.AggregateCheckResults(evaluator.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec)).Allowed {
			t.Error("a pod without security contexts passes restricted: the evaluation checks nothing")
		}
	})
	for name, objs := range installs {
		t.Run(name, func(t *testing.T) {
			pod := controller(t, objs).Spec.Template
			result := policy.AggregateCheckResults(evaluator.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec))
			if !result.Allowed {
				t.Errorf("Pod Security restricted forbids the controller: %s: %s", result.ForbiddenReason(), result.ForbiddenDetail())
			}
			for _, ns := range find(objs, "Namespace", "") {
				if got := ns.GetLabels()[psaapi.EnforceLevelLabel]; got != string(psaapi.LevelRestricted) {
					t.Errorf("Namespace %s enforces %q, want restricted", ns.GetName(), got)
				}
			}
		})
	}
}
