package faultproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// upstream stands in for the API server: it counts the requests it
// served and streams watches until the client goes away.
func upstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var served atomic.Int64
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if auth := r.Header.Get("Authorization"); auth != "" {
			t.Errorf("the client's credentials reached the API server: %q", auth)
		}
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, `{"kind":"Status","status":"Success"}`)
	}))
	t.Cleanup(s.Close)
	return s, &served
}

func TestProxy(t *testing.T) {
	cases := []struct {
		name   string
		fault  Fault
		method string
		path   string
		code   int // 0: the connection is dropped
		served int64
	}{
		{name: "no fault", method: http.MethodPatch, path: "/apis/berth.dev/v1alpha1/namespaces/ns/workloads/w/status", code: 200, served: 1},
		{name: "commit then 504", fault: Fault{Kind: CommitThen504, Match: WorkloadStatusWrite, Probability: 1},
			method: http.MethodPatch, path: "/apis/berth.dev/v1alpha1/namespaces/ns/workloads/w/status", code: 504, served: 1},
		{name: "commit then 504 spares other writes", fault: Fault{Kind: CommitThen504, Match: WorkloadStatusWrite, Probability: 1},
			method: http.MethodPatch, path: "/apis/batch/v1/namespaces/ns/jobs/j", code: 200, served: 1},
		{name: "commit then drop", fault: Fault{Kind: CommitThenDrop, Match: Writes, Probability: 1},
			method: http.MethodPost, path: "/api/v1/namespaces/ns/events", code: 0, served: 1},
		{name: "throttle", fault: Fault{Kind: Throttle, Probability: 1}, method: http.MethodGet, path: "/api/v1/pods", code: 429, served: 0},
		{name: "latency", fault: Fault{Kind: Latency, Delay: 10 * time.Millisecond, Probability: 1}, method: http.MethodGet, path: "/api/v1/pods", code: 200, served: 1},
		{name: "probability zero", fault: Fault{Kind: Throttle}, method: http.MethodGet, path: "/api/v1/pods", code: 200, served: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up, served := upstream(t)
			p, hc := start(t, up)
			p.Set(tc.fault)
			req, err := http.NewRequest(tc.method, p.server.URL+tc.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			switch {
			case tc.code == 0 && err == nil:
				t.Fatalf("got %d, want a dropped connection", resp.StatusCode)
			case tc.code != 0 && err != nil:
				t.Fatalf("request failed: %v", err)
			case tc.code != 0:
				_ = resp.Body.Close()
				if resp.StatusCode != tc.code {
					t.Fatalf("got %d, want %d", resp.StatusCode, tc.code)
				}
			}
			if got := served.Load(); got != tc.served {
				t.Errorf("the API server served %d requests, want %d", got, tc.served)
			}
		})
	}
}

func TestCutWatchResumesWithGone(t *testing.T) {
	up, _ := upstream(t)
	p, hc := start(t, up)
	p.Set(Fault{Kind: CutWatch, After: 20 * time.Millisecond, Probability: 1})
	resp, err := hc.Get(p.server.URL + "/api/v1/pods?watch=true&resourceVersion=5")
	if err != nil {
		t.Fatal(err)
	}
	// The stream ends by itself after After.
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Logf("stream ended with %v", err)
	}
	_ = resp.Body.Close()
	p.Set()
	resp, err = hc.Get(p.server.URL + "/api/v1/pods?watch=true&resourceVersion=9")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"type":"ERROR"`) || !strings.Contains(string(body), `"code":410`) {
		t.Fatalf("the resumed watch got %s, want an ERROR event with code 410", body)
	}
	if got := p.Injected()[CutWatch]; got != 1 {
		t.Errorf("Injected()[CutWatch] = %d, want 1", got)
	}
}

// start runs a proxy to up and returns it with an HTTP client built from
// the kubeconfig it wrote.
func start(t *testing.T, up *httptest.Server) (*Proxy, *http.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := &rest.Config{Host: up.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	p, err := Start(ctx, cfg, filepath.Join(t.TempDir(), "kubeconfig"), 1)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(kc)
	if err != nil {
		t.Fatal(err)
	}
	return p, hc
}
