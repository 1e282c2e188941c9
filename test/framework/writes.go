package framework

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// WriteCounter counts the writes a client sends to the API server, by
// method and resource ("PATCH pods", "PUT workloads/status"), in all and
// per namespace: what berth's work costs the API server. A write the API
// server refused is counted apart, with its status code ("POST workloads
// 409": a create from a cache that did not show the object yet), so that
// the writes that changed something can be told from the attempts. Give
// its Wrap to BerthOptions.WrapTransport.
type WriteCounter struct {
	mu sync.Mutex
	// counts by namespace ("" for cluster-scoped objects), then key.
	counts map[string]map[string]int
}

// Wrap counts rt's writes.
func (w *WriteCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			key := r.Method + " " + resourceOf(r.URL.Path)
			switch {
			case err != nil:
				key += " error"
			case resp.StatusCode >= http.StatusMultipleChoices:
				key += " " + strconv.Itoa(resp.StatusCode)
			}
			ns := namespaceOf(r.URL.Path)
			w.mu.Lock()
			if w.counts == nil {
				w.counts = map[string]map[string]int{}
			}
			if w.counts[ns] == nil {
				w.counts[ns] = map[string]int{}
			}
			w.counts[ns][key]++
			w.mu.Unlock()
		}
		return resp, err
	})
}

// Since returns the writes counted after before, a Snapshot.
func (w *WriteCounter) Since(before map[string]int) map[string]int {
	return minus(w.Snapshot(), before)
}

// Snapshot returns the counts over all namespaces.
func (w *WriteCounter) Snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, m := range w.counts {
		for k, n := range m {
			out[k] += n
		}
	}
	return out
}

// SnapshotIn returns the counts of the writes to objects of namespace ns.
func (w *WriteCounter) SnapshotIn(ns string) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.counts[ns])
}

// SinceIn returns the writes to objects of ns counted after before, a
// SnapshotIn(ns).
func (w *WriteCounter) SinceIn(ns string, before map[string]int) map[string]int {
	return minus(w.SnapshotIn(ns), before)
}

func minus(now, before map[string]int) map[string]int {
	if now == nil {
		now = map[string]int{}
	}
	for k, n := range before {
		if now[k] -= n; now[k] <= 0 {
			delete(now, k)
		}
	}
	return now
}

// namespaceOf is the namespace an API path names an object in, "" for a
// cluster-scoped one (a namespace itself included).
func namespaceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "namespaces" && (parts[0] == "api" && i == 2 || parts[0] == "apis" && i == 3) {
			return parts[i+1]
		}
	}
	return ""
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf is the resource, with its subresource, that an API path
// names: /api/v1/namespaces/ns/pods/p is "pods",
// /apis/berth.dev/v1alpha1/namespaces/ns/workloads/w/status is
// "workloads/status".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return path
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
