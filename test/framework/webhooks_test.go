package framework

import (
	"net/http"
	"strconv"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/berth-dev/berth/test/controlplane"
)

// TestServedBy: an installed webhook is kept only when berth's webhook
// server has a handler for the exact path it calls.
func TestServedBy(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/validate--v1-pod", http.NotFoundHandler())
	mux.Handle("/mutate-batch-v1-job", http.NotFoundHandler())
	base := "https://127.0.0.1:9443"
	for _, tc := range []struct {
		name string
		mux  *http.ServeMux
		cc   admissionv1.WebhookClientConfig
		want bool
	}{
		{"registered path", mux, admissionv1.WebhookClientConfig{URL: ptr.To(base + "/validate--v1-pod")}, true},
		{"as envtest writes it, with a double slash", mux, admissionv1.WebhookClientConfig{URL: ptr.To(base + "//validate--v1-pod")}, true},
		{"another registered path", mux, admissionv1.WebhookClientConfig{URL: ptr.To(base + "/mutate-batch-v1-job")}, true},
		{"path of a kind not started", mux, admissionv1.WebhookClientConfig{URL: ptr.To(base + "/mutate--v1-pod")}, false},
		{"prefix of a registered path", mux, admissionv1.WebhookClientConfig{URL: ptr.To(base + "/validate")}, false},
		{"no webhook registered at all", nil, admissionv1.WebhookClientConfig{URL: ptr.To(base + "/validate--v1-pod")}, false},
		{"a Service, not a URL", mux, admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "webhook-service"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := servedBy(tc.mux)(tc.cc); got != tc.want {
				t.Errorf("served = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMoveWebhookPort: the installed configurations are pointed at the new
// port, path and host kept; a configuration that names a Service is left
// alone.
func TestMoveWebhookPort(t *testing.T) {
	wh := envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1", LocalServingPort: 41599,
		MutatingWebhooks: []*admissionv1.MutatingWebhookConfiguration{{Webhooks: []admissionv1.MutatingWebhook{
			{Name: "m", ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:41599//mutate--v1-pod")}},
			{Name: "s", ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "svc"}}},
		}}},
		ValidatingWebhooks: []*admissionv1.ValidatingWebhookConfiguration{{Webhooks: []admissionv1.ValidatingWebhook{
			{Name: "v", ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:41599//validate--v1-pod")}},
		}}},
	}
	e := &Env{Plane: &controlplane.Plane{Env: &envtest.Environment{WebhookInstallOptions: wh}}}
	if err := e.moveWebhookPort(); err != nil {
		t.Fatal(err)
	}
	got := e.Plane.Env.WebhookInstallOptions
	if got.LocalServingPort == 41599 || got.LocalServingPort == 0 {
		t.Fatalf("port %d, want a new one", got.LocalServingPort)
	}
	want := func(path string) string {
		return "https://127.0.0.1:" + strconv.Itoa(got.LocalServingPort) + "/" + path
	}
	if u := *got.MutatingWebhooks[0].Webhooks[0].ClientConfig.URL; u != want("/mutate--v1-pod") {
		t.Errorf("mutating URL %s, want %s", u, want("/mutate--v1-pod"))
	}
	if u := *got.ValidatingWebhooks[0].Webhooks[0].ClientConfig.URL; u != want("/validate--v1-pod") {
		t.Errorf("validating URL %s, want %s", u, want("/validate--v1-pod"))
	}
	if cc := got.MutatingWebhooks[0].Webhooks[1].ClientConfig; cc.URL != nil || cc.Service == nil {
		t.Errorf("a Service configuration changed: %+v", cc)
	}
}
