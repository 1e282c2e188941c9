package leader

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// lock is a resourcelock.Interface that accepts or refuses writes.
type lock struct{ fail error }

func (l *lock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return nil, nil, nil
}
func (l *lock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.fail }
func (l *lock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.fail }
func (l *lock) RecordEvent(string)                                              {}
func (l *lock) Identity() string                                                { return "me" }
func (l *lock) Describe() string                                                { return "berth-system/berth" }

func TestFence(t *testing.T) {
	const deadline = 10 * time.Second
	start := time.Unix(1000, 0)
	type step struct {
		at     time.Duration // since start
		holder string        // "" : no lock write at this step
		fail   bool
	}
	cases := []struct {
		name    string
		steps   []step
		checkAt time.Duration
		fenced  bool
	}{
		{name: "never held", checkAt: 0, fenced: true},
		{name: "just acquired", steps: []step{{at: 0, holder: "me"}}, checkAt: time.Second},
		{name: "renewal older than the deadline", steps: []step{{at: 0, holder: "me"}}, checkAt: deadline, fenced: true},
		{name: "renewed in time", steps: []step{{at: 0, holder: "me"}, {at: 8 * time.Second, holder: "me"}}, checkAt: 15 * time.Second},
		{name: "a failed renewal does not count", steps: []step{{at: 0, holder: "me"}, {at: 8 * time.Second, holder: "me", fail: true}}, checkAt: 15 * time.Second, fenced: true},
		{name: "released", steps: []step{{at: 0, holder: "me"}, {at: time.Second, holder: ""}}, checkAt: 2 * time.Second, fenced: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inner := &lock{}
			l := Wrap(inner, deadline)
			now := start
			l.now = func() time.Time { return now }
			for i, s := range tc.steps {
				now = start.Add(s.at)
				inner.fail = nil
				if s.fail {
					inner.fail = errors.New("timeout")
				}
				rec := resourcelock.LeaderElectionRecord{HolderIdentity: s.holder}
				write := l.Update
				if i == 0 {
					write = l.Create
				}
				if err := write(context.Background(), rec); (err != nil) != s.fail {
					t.Fatalf("step %d: write error %v, want failure %v", i, err, s.fail)
				}
			}
			now = start.Add(tc.checkAt)
			err := l.Fence()
			if (err != nil) != tc.fenced {
				t.Fatalf("Fence() = %v, want fenced %v", err, tc.fenced)
			}
			if err != nil && !errors.Is(err, ErrNotLeader) {
				t.Errorf("Fence() = %v, want it to wrap ErrNotLeader", err)
			}
		})
	}
}

func TestFenceTransport(t *testing.T) {
	fenced := errors.New("fenced")
	cases := []struct {
		name, method, path string
		allowed            bool
	}{
		{name: "a Job create is fenced", method: http.MethodPost, path: "/apis/batch/v1/namespaces/ns/jobs"},
		{name: "a Pod patch is fenced", method: http.MethodPatch, path: "/api/v1/namespaces/ns/pods/p"},
		{name: "a Workload status write is fenced", method: http.MethodPut, path: "/apis/berth.dev/v1alpha1/namespaces/ns/workloads/w/status"},
		{name: "a pod eviction is fenced", method: http.MethodPost, path: "/api/v1/namespaces/ns/pods/p/eviction"},
		{name: "a cluster-scoped delete is fenced", method: http.MethodDelete, path: "/apis/berth.dev/v1alpha1/clusterqueues/q"},
		{name: "a namespace named secrets is still fenced", method: http.MethodPost, path: "/api/v1/namespaces/secrets/pods"},
		{name: "reads are not", method: http.MethodGet, path: "/api/v1/namespaces/ns/pods", allowed: true},
		{name: "the certificate Secret is not", method: http.MethodPut, path: "/api/v1/namespaces/ns/secrets/s", allowed: true},
		{name: "events are not", method: http.MethodPost, path: "/apis/events.k8s.io/v1/namespaces/ns/events", allowed: true},
		{name: "core events are not", method: http.MethodPatch, path: "/api/v1/namespaces/ns/events/e", allowed: true},
		{name: "leases are not", method: http.MethodPut, path: "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", allowed: true},
		{name: "webhook configurations are not", method: http.MethodPatch,
			path: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/berth", allowed: true},
		{name: "the APIService is not", method: http.MethodPut, path: "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.visibility.berth.dev", allowed: true},
		{name: "a malformed path is fenced", method: http.MethodPost, path: "/apis", allowed: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sent := false
			next := roundTripFunc(func(*http.Request) (*http.Response, error) {
				sent = true
				return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
			})
			rt := FenceTransport(func() error { return fenced })(next)
			req := httptest.NewRequest(tc.method, "https://apiserver"+tc.path, strings.NewReader("{}"))
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			if sent != tc.allowed || errors.Is(err, fenced) == tc.allowed {
				t.Fatalf("RoundTrip(%s %s): sent %v, error %v; want allowed %v", tc.method, tc.path, sent, err, tc.allowed)
			}
		})
	}
	t.Run("a renewed lease lets writes through", func(t *testing.T) {
		sent := false
		next := roundTripFunc(func(*http.Request) (*http.Response, error) {
			sent = true
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
		})
		rt := FenceTransport(func() error { return nil })(next)
		req := httptest.NewRequest(http.MethodPost, "https://apiserver/apis/batch/v1/namespaces/ns/jobs", http.NoBody)
		resp, err := rt.RoundTrip(req)
		if err != nil || !sent {
			t.Fatalf("RoundTrip() = %v, sent %v; want sent", err, sent)
		}
		_ = resp.Body.Close()
	})
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
