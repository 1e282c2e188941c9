package framework

import (
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
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
