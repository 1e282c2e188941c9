package burst

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestResourceOf(t *testing.T) {
	cases := []struct{ path, want string }{
		{"/api/v1/namespaces/ns/pods/p", "pods"},
		{"/api/v1/namespaces/ns/pods", "pods"},
		{"/api/v1/namespaces/ns/pods/p/binding", "pods/binding"},
		{"/apis/berth.dev/v1alpha1/namespaces/ns/workloads/w/status", "workloads/status"},
		{"/apis/events.k8s.io/v1/namespaces/ns/events", "events"},
		{"/apis/berth.dev/v1alpha1/clusterqueues/cq/status", "clusterqueues/status"},
		{"/api/v1/namespaces/ns", "namespaces"},
		{"/healthz", "/healthz"},
	}
	for _, tc := range cases {
		if got := resourceOf(tc.path); got != tc.want {
			t.Errorf("resourceOf(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestWriteCounterCountsWritesOnly(t *testing.T) {
	// The API server refuses a create of a Workload that exists.
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/exists") {
			rw.WriteHeader(http.StatusConflict)
		}
	}))
	defer srv.Close()
	w := &writeCounter{}
	c := &http.Client{Transport: w.wrap(http.DefaultTransport)}
	send := func(method, path string) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send(http.MethodGet, "/api/v1/namespaces/ns/pods")
	before := w.snapshot()
	send(http.MethodPatch, "/api/v1/namespaces/ns/pods/a")
	send(http.MethodPatch, "/api/v1/namespaces/ns/pods/b")
	send(http.MethodPost, "/apis/berth.dev/v1alpha1/namespaces/ns/workloads")
	send(http.MethodGet, "/apis/berth.dev/v1alpha1/namespaces/ns/workloads")
	send(http.MethodPost, "/apis/berth.dev/v1alpha1/namespaces/ns/workloads/exists")
	got := w.since(before)
	want := map[string]int{"PATCH pods": 2, "POST workloads": 1, "POST workloads 409": 1}
	if !maps.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
}
