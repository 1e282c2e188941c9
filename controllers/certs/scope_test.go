package certs

import (
	"net/http"
	"testing"
)

// recorder is a transport that keeps the last request it was given.
type recorder struct{ got *http.Request }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

func TestNameScope(t *testing.T) {
	const path = "/api/v1/namespaces/berth-system/secrets"
	cases := []struct {
		name, method, url string
		wantSelector      string // "" : the request passes unchanged
	}{
		{"list is scoped", http.MethodGet, path + "?limit=500", "metadata.name=certs"},
		{"watch is scoped", http.MethodGet, path + "?watch=true&resourceVersion=7", "metadata.name=certs"},
		{"an existing field selector is kept", http.MethodGet, path + "?fieldSelector=type%3Dkubernetes.io%2Ftls",
			"type=kubernetes.io/tls,metadata.name=certs"},
		{"get by name passes", http.MethodGet, path + "/certs", ""},
		{"update passes", http.MethodPut, path + "/certs", ""},
		{"another namespace passes", http.MethodGet, "/api/v1/namespaces/team-a/secrets", ""},
		{"another resource passes", http.MethodGet, "/api/v1/namespaces/berth-system/configmaps", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := &recorder{}
			req, err := http.NewRequest(c.method, "https://apiserver"+c.url, http.NoBody)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := nameScope{next: next, path: path, name: "certs"}.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			got := next.got.URL.Query().Get("fieldSelector")
			if c.wantSelector == "" {
				if next.got.URL.String() != req.URL.String() {
					t.Fatalf("request changed to %s, want %s unchanged", next.got.URL, req.URL)
				}
				return
			}
			if got != c.wantSelector {
				t.Fatalf("fieldSelector = %q, want %q", got, c.wantSelector)
			}
			if req.URL.Query().Get("fieldSelector") == got {
				t.Fatalf("the caller's request was modified in place")
			}
			for k, v := range req.URL.Query() {
				if k != "fieldSelector" && next.got.URL.Query().Get(k) != v[0] {
					t.Fatalf("query %s = %q, want %q kept", k, next.got.URL.Query().Get(k), v[0])
				}
			}
		})
	}
}
