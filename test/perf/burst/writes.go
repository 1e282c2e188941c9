package burst

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// writeCounter counts the writes berth sends to the API server, by method
// and resource ("PATCH pods", "PUT workloads/status"): what a burst costs
// the API server beyond kube-scheduler's own work. A write the API server
// refused is counted apart, with its status code ("POST workloads 409": a
// create from a cache that did not show the object yet), so that the
// writes that changed something can be told from the attempts.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// wrap counts rt's writes.
func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
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
			w.mu.Lock()
			if w.counts == nil {
				w.counts = map[string]int{}
			}
			w.counts[key]++
			w.mu.Unlock()
		}
		return resp, err
	})
}

// since returns the writes counted after before, a snapshot.
func (w *writeCounter) since(before map[string]int) map[string]int {
	now := w.snapshot()
	for k, n := range before {
		if now[k] -= n; now[k] <= 0 {
			delete(now, k)
		}
	}
	return now
}

// snapshot returns a copy of the counts.
func (w *writeCounter) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.counts)
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
