package podgate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/test/repo"
)

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := admissionv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// mapper serves admissionregistration.k8s.io/v1 with or without the
// mutating admission policy kinds.
func mapper(served bool) meta.RESTMapper {
	gv := admissionv1.SchemeGroupVersion
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	m.Add(gv.WithKind("MutatingWebhookConfiguration"), meta.RESTScopeRoot)
	if served {
		m.Add(gv.WithKind("MutatingAdmissionPolicy"), meta.RESTScopeRoot)
		m.Add(gv.WithKind("MutatingAdmissionPolicyBinding"), meta.RESTScopeRoot)
	}
	return m
}

func TestDetect(t *testing.T) {
	binding := &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: DefaultPolicyBinding},
		Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "berth-pod-gate"}}
	policy := &admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "berth-pod-gate"}}
	cases := []struct {
		name    string
		served  bool
		objs    []client.Object
		want    string
		wantWhy string
	}{
		{"not served", false, nil, metrics.PodGateWebhook, "does not serve"},
		{"no binding", true, []client.Object{policy}, metrics.PodGateWebhook, "MutatingAdmissionPolicyBinding berth-pod-gate is not installed"},
		{"binding without its policy", true, []client.Object{binding}, metrics.PodGateWebhook, "MutatingAdmissionPolicy berth-pod-gate, which binding berth-pod-gate names, is not installed"},
		{"bound", true, []client.Object{binding, policy}, metrics.PodGatePolicy, "is bound by berth-pod-gate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(tc.objs...).Build()
			got, why, err := Detect(context.Background(), mapper(tc.served), c, DefaultPolicyBinding)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || !strings.Contains(why, tc.wantWhy) {
				t.Errorf("Detect = %q (%s), want %q (%s)", got, why, tc.want, tc.wantWhy)
			}
		})
	}
}

func TestReconcileSetsTheCondition(t *testing.T) {
	cases := []struct {
		name    string
		handOff bool
		before  string
		want    string
	}{
		{"as installed, hand-off off", false, GateCondition, GateCondition},
		{"hand-off on widens it", true, GateCondition, HandOffCondition},
		{"hand-off off narrows it back", false, HandOffCondition, GateCondition},
		{"an edited condition is put back", false, "true", GateCondition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "hooks"},
				Webhooks: []admissionv1.MutatingWebhook{
					{Name: "mjob.berth.dev", MatchConditions: []admissionv1.MatchCondition{{Name: "other", Expression: "true"}}},
					{Name: Webhook, MatchConditions: []admissionv1.MatchCondition{{Name: conditionName, Expression: tc.before}}},
				}}
			c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(cfg).Build()
			r := New(c, c, mapper(true), metrics.New(), Options{WebhookConfiguration: "hooks", HandOff: tc.handOff})
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "hooks"}}); err != nil {
				t.Fatal(err)
			}
			got := &admissionv1.MutatingWebhookConfiguration{}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "hooks"}, got); err != nil {
				t.Fatal(err)
			}
			if e := got.Webhooks[1].MatchConditions[0].Expression; e != tc.want {
				t.Errorf("condition %q, want %q", e, tc.want)
			}
			if e := got.Webhooks[0].MatchConditions[0].Expression; e != "true" {
				t.Errorf("another webhook's condition changed to %q", e)
			}
		})
	}
}

// TestInstalledConditions: the generated webhook configuration and the
// policy carry the conditions this package names.
func TestInstalledConditions(t *testing.T) {
	root := repo.MustRoot()
	raw, err := os.ReadFile(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, doc := range strings.Split(string(raw), "\n---") {
		cfg := &admissionv1.MutatingWebhookConfiguration{}
		if err := yaml.Unmarshal([]byte(doc), cfg); err != nil || cfg.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		for _, w := range cfg.Webhooks {
			if w.Name == Webhook {
				found = true
				if !slices.Equal(w.MatchConditions, Condition(false)) {
					t.Errorf("%s's conditions in manifests.yaml are %v, want GateCondition", Webhook, w.MatchConditions)
				}
			}
		}
	}
	if !found {
		t.Fatalf("manifests.yaml has no %s", Webhook)
	}
	raw, err = os.ReadFile(filepath.Join(root, "config", "webhook", "pod_gate_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := &admissionv1.MutatingAdmissionPolicy{}
	if err := yaml.Unmarshal([]byte(strings.Split(string(raw), "\n---")[0]), policy); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range policy.Spec.MatchConditions {
		got = append(got, c.Expression)
	}
	want := []string{Queued, "!" + JobPod, "!" + Gated}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the policy's conditions are\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
