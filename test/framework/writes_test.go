package framework

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
	w := &WriteCounter{}
	c := &http.Client{Transport: w.Wrap(http.DefaultTransport)}
	do := func(method, path string) { send(t, c, method, srv.URL+path) }
	do(http.MethodGet, "/api/v1/namespaces/ns/pods")
	before := w.Snapshot()
	do(http.MethodPatch, "/api/v1/namespaces/ns/pods/a")
	do(http.MethodPatch, "/api/v1/namespaces/ns/pods/b")
	do(http.MethodPost, "/apis/berth.dev/v1alpha1/namespaces/ns/workloads")
	do(http.MethodGet, "/apis/berth.dev/v1alpha1/namespaces/ns/workloads")
	do(http.MethodPost, "/apis/berth.dev/v1alpha1/namespaces/ns/workloads/exists")
	got := w.Since(before)
	want := map[string]int{"PATCH pods": 2, "POST workloads": 1, "POST workloads 409": 1}
	if !maps.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
}

// TestWriteCounterPerNamespace: writes are counted per namespace of the
// object written, cluster-scoped ones under "".
func TestWriteCounterPerNamespace(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	w := &WriteCounter{}
	c := &http.Client{Transport: w.Wrap(http.DefaultTransport)}
	for _, path := range []string{
		"/api/v1/namespaces/a/pods/p", "/api/v1/namespaces/a/pods/q", "/apis/berth.dev/v1alpha1/namespaces/b/workloads/w/status",
		"/apis/berth.dev/v1alpha1/clusterqueues/cq/status", "/api/v1/namespaces/a",
	} {
		send(t, c, http.MethodPatch, srv.URL+path)
	}
	for ns, want := range map[string]map[string]int{
		"a": {"PATCH pods": 2}, "b": {"PATCH workloads/status": 1}, "": {"PATCH clusterqueues/status": 1, "PATCH namespaces": 1},
	} {
		if got := w.SinceIn(ns, nil); !maps.Equal(got, want) {
			t.Errorf("writes in %q: %v, want %v", ns, got, want)
		}
	}
}

// send makes one request through c.
func send(t *testing.T, c *http.Client, method, url string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
