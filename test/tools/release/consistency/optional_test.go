package consistency

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestOptionalObjects: what a value turns on (or off) is rendered, and
// only then.
func TestOptionalObjects(t *testing.T) {
	cases := []struct {
		name  string
		sets  []string
		check func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{"ServiceMonitor off by default", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(find(objs, "ServiceMonitor", "")) + len(find(objs, "PrometheusRule", "")); n != 0 {
				t.Errorf("%d monitoring objects by default", n)
			}
		}},
		{"ServiceMonitor", []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=kube-prometheus"}, checkServiceMonitor},
		{"ServiceMonitor over plain HTTP", []string{"metrics.serviceMonitor.enabled=true", "metrics.secure=false"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			ep := endpoint(t, objs)
			if ep["scheme"] != "http" || ep["port"] != "http" || ep["bearerTokenFile"] != nil || ep["tlsConfig"] != nil {
				t.Errorf("plain-HTTP endpoint %v", ep)
			}
		}},
		{"PrometheusRule", []string{"metrics.prometheusRule.enabled=true"}, checkPrometheusRule},
		{"PodDisruptionBudget by default", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			pdb := typed(t, one(t, objs, "PodDisruptionBudget", "berth-controller"), &policyv1.PodDisruptionBudget{})
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
				t.Errorf("minAvailable %v, want 1", pdb.Spec.MinAvailable)
			}
		}},
		{"PodDisruptionBudget as a percentage", []string{"podDisruptionBudget.minAvailable=50%"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			pdb := typed(t, one(t, objs, "PodDisruptionBudget", "berth-controller"), &policyv1.PodDisruptionBudget{})
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "50%" {
				t.Errorf("minAvailable %v, want 50%%", pdb.Spec.MinAvailable)
			}
		}},
		{"no PodDisruptionBudget for one replica", []string{"replicas=1"}, noneOf("PodDisruptionBudget")},
		{"the Role names the certificate Secret", []string{"webhook.secretName=webhook-tls"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			role := typed(t, one(t, objs, "Role", "berth-controller"), &rbacv1.Role{})
			var named []string
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "secrets") && slices.Contains(r.Verbs, "update") {
					named = append(named, r.ResourceNames...)
				}
			}
			if !slices.Equal(named, []string{"webhook-tls"}) {
				t.Errorf("secrets berth may update: %v, want only webhook-tls", named)
			}
		}},
		{"no PodDisruptionBudget when off", []string{"podDisruptionBudget.enabled=false"}, noneOf("PodDisruptionBudget")},
		{"the pod gate policy by default", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			one(t, objs, "MutatingAdmissionPolicy", "berth-pod-gate")
			one(t, objs, "MutatingAdmissionPolicyBinding", "berth-pod-gate")
		}},
		{"no pod gate policy when off", []string{"webhook.podGatePolicy=false"}, noneOf("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")},
		{"no visibility API when off", []string{"visibility.enabled=false"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			noneOf("APIService", "PriorityLevelConfiguration")(t, objs)
			if n := len(find(objs, "FlowSchema", "berth-visibility")); n != 0 {
				t.Errorf("%d FlowSchemas berth-visibility rendered", n)
			}
			one(t, objs, "FlowSchema", "berth-controller")
		}},
		{"berth's FlowSchema at workload-high by default", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			checkControllerFlowSchema(t, objs, "workload-high")
		}},
		{"berth's FlowSchema at another level", []string{"flowControl.priorityLevel=workload-critical"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			checkControllerFlowSchema(t, objs, "workload-critical")
		}},
		{"no FlowSchema for berth when its level is empty", []string{"flowControl.priorityLevel="}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(find(objs, "FlowSchema", "berth-controller")); n != 0 {
				t.Errorf("%d FlowSchemas berth-controller rendered", n)
			}
		}},
		{"the visibility Service forwards to the pod's port", []string{"visibility.port=9082"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			svc := typed(t, one(t, objs, "Service", "berth-visibility"), &corev1.Service{})
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "visibility" || svc.Spec.Ports[0].Port != 443 {
				t.Errorf("visibility Service ports %+v, want 443 to the named port visibility", svc.Spec.Ports)
			}
			var port int32
			for _, p := range controller(t, objs).Spec.Template.Spec.Containers[0].Ports {
				if p.Name == "visibility" {
					port = p.ContainerPort
				}
			}
			if port != 9082 {
				t.Errorf("container port visibility = %d, want 9082", port)
			}
		}},
		{"anti-affinity by default", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			a := controller(t, objs).Spec.Template.Spec.Affinity
			if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
				a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
				t.Errorf("affinity %+v, want preferred anti-affinity across kubernetes.io/hostname", a)
			}
		}},
		{"affinity removed", []string{"affinity=null"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if a := controller(t, objs).Spec.Template.Spec.Affinity; a != nil {
				t.Errorf("affinity %+v after affinity=null", a)
			}
		}},
		{"pod scheduling and metadata", []string{
			"priorityClassName=system-cluster-critical", "nodeSelector.pool=system",
			"tolerations[0].key=dedicated", "tolerations[0].operator=Exists", "tolerations[0].effect=NoSchedule",
			"podAnnotations.example\\.com/team=ml", "podLabels.team=ml",
			"imagePullSecrets[0].name=regcred", "image.pullPolicy=Always",
		}, checkPodSettings},
		{"metrics readers", []string{"metrics.readers[0].name=prometheus-k8s", "metrics.readers[0].namespace=monitoring"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			b := one(t, objs, "ClusterRoleBinding", "berth-metrics-reader")
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			if len(subjects) != 1 || subjects[0].(map[string]any)["namespace"] != "monitoring" {
				t.Errorf("subjects %v", subjects)
			}
		}},
		{"metrics off", []string{"metrics.enabled=false"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if n := len(find(objs, "Service", "berth-controller-metrics-service")); n != 0 {
				t.Error("metrics Service rendered with metrics off")
			}
			for _, p := range manager(t, objs).Ports {
				if p.Name == "metrics" {
					t.Error("metrics port with metrics off")
				}
			}
		}},
		{"no CRDs", []string{"crds.install=false"}, noneOf("CustomResourceDefinition")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check(t, render(t, "berth-system", nil, c.sets...))
		})
	}
}

func noneOf(kinds ...string) func(*testing.T, []*unstructured.Unstructured) {
	return func(t *testing.T, objs []*unstructured.Unstructured) {
		for _, kind := range kinds {
			if n := len(find(objs, kind, "")); n != 0 {
				t.Errorf("%d %s rendered", n, kind)
			}
		}
	}
}

// endpoint is the ServiceMonitor's one endpoint.
func endpoint(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(one(t, objs, "ServiceMonitor", "berth-controller-metrics").Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("want one endpoint, got %v", eps)
	}
	return eps[0].(map[string]any)
}

// checkServiceMonitor: HTTPS with Prometheus' token, no verification of
// the self-signed certificate, selecting exactly the metrics Service.
func checkServiceMonitor(t *testing.T, objs []*unstructured.Unstructured) {
	ep := endpoint(t, objs)
	insecure, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify")
	if ep["scheme"] != "https" || ep["port"] != "https" || ep["path"] != "/metrics" ||
		ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" || !insecure {
		t.Errorf("endpoint %v: want https, port https, /metrics, the ServiceAccount token and insecureSkipVerify", ep)
	}
	sm := one(t, objs, "ServiceMonitor", "berth-controller-metrics")
	if sm.GetLabels()["release"] != "kube-prometheus" {
		t.Errorf("labels %v lack metrics.serviceMonitor.labels", sm.GetLabels())
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for _, svc := range find(objs, "Service", "") {
		matches := true
		for k, v := range sel {
			matches = matches && svc.GetLabels()[k] == v
		}
		if matches != (svc.GetName() == "berth-controller-metrics-service") {
			t.Errorf("selector %v matches Service %s: %v", sel, svc.GetName(), matches)
		}
	}
}

// checkPrometheusRule: alerts on each of berth's key series, scoped to the
// release's namespace.
func checkPrometheusRule(t *testing.T, objs []*unstructured.Unstructured) {
	groups, _, _ := unstructured.NestedSlice(one(t, objs, "PrometheusRule", "berth-controller").Object, "spec", "groups")
	var exprs []string
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			expr, _ := rule["expr"].(string)
			if rule["alert"] == nil || expr == "" || rule["annotations"] == nil {
				t.Errorf("rule %v lacks an alert name, an expression or annotations", rule)
			}
			if !strings.Contains(expr, `namespace="berth-system"`) {
				t.Errorf("%v: expression %q is not scoped to the release namespace", rule["alert"], expr)
			}
			exprs = append(exprs, expr)
		}
	}
	for _, series := range []string{"berth_admission_cycle_duration_seconds", "berth_admissions_total",
		"berth_provisioning_attempts_total", "berth_admission_wait_seconds", "berth_build_info", "up{"} {
		if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, series) }) {
			t.Errorf("no alert on %s", series)
		}
	}
}

// checkPodSettings: the pod-level values land in the pod template.
func checkPodSettings(t *testing.T, objs []*unstructured.Unstructured) {
	d := controller(t, objs)
	pod := d.Spec.Template
	if pod.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", pod.Spec.PriorityClassName)
	}
	if pod.Spec.NodeSelector["pool"] != "system" {
		t.Errorf("nodeSelector %v", pod.Spec.NodeSelector)
	}
	want := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0] != want {
		t.Errorf("tolerations %v", pod.Spec.Tolerations)
	}
	if pod.Annotations["example.com/team"] != "ml" || pod.Annotations["kubectl.kubernetes.io/default-container"] != "manager" {
		t.Errorf("pod annotations %v", pod.Annotations)
	}
	if pod.Labels["team"] != "ml" || pod.Labels["app.kubernetes.io/component"] != "controller" {
		t.Errorf("pod labels %v", pod.Labels)
	}
	if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("imagePullSecrets %v", pod.Spec.ImagePullSecrets)
	}
	if c := pod.Spec.Containers[0]; c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("imagePullPolicy %q", c.ImagePullPolicy)
	}
	if d.Spec.Selector.MatchLabels["team"] != "" {
		t.Error("podLabels leaked into the selector, which is immutable")
	}
}

// checkControllerFlowSchema checks that berth's FlowSchema serves its
// ServiceAccount, in the release's namespace, at level.
func checkControllerFlowSchema(t *testing.T, objs []*unstructured.Unstructured, level string) {
	t.Helper()
	fs := typed(t, one(t, objs, "FlowSchema", "berth-controller"), &flowcontrolv1.FlowSchema{})
	if fs.Spec.PriorityLevelConfiguration.Name != level {
		t.Errorf("priority level %q, want %q", fs.Spec.PriorityLevelConfiguration.Name, level)
	}
	if len(fs.Spec.Rules) != 1 || len(fs.Spec.Rules[0].Subjects) != 1 || fs.Spec.Rules[0].Subjects[0].ServiceAccount == nil {
		t.Fatalf("rules %+v, want one rule for one ServiceAccount", fs.Spec.Rules)
	}
	if sa := fs.Spec.Rules[0].Subjects[0].ServiceAccount; sa.Name != "berth-controller" || sa.Namespace != "berth-system" {
		t.Errorf("ServiceAccount %s/%s, want berth-system/berth-controller", sa.Namespace, sa.Name)
	}
}
