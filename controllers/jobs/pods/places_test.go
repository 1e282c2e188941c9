package pods

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/controllers/jobs"
)

// TestConcurrentCreatesTakeOnePlace: a pod set admitted for two pods runs
// one; ten pods created into it at once, as a tenant would race them into
// the free place, are answered one at a time and exactly one is let in,
// whatever the API server lists meanwhile.
func TestConcurrentCreatesTakeOnePlace(t *testing.T) {
	g := newGang(t)
	api := g.client([]*corev1.Pod{g.member("a1", nil)})
	v := Validator{Workloads: jobs.Workloads{Cache: api, API: api}, Places: &Places{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var let []string
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := g.member(fmt.Sprintf("n%d", i), nil)
			if _, err := v.ValidateCreate(context.Background(), p); err == nil {
				mu.Lock()
				let = append(let, p.Name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(let) != 1 {
		t.Fatalf("let in %v, want exactly one pod into the one free place", let)
	}
}

// TestPlacesForgetWhatTheCountShows: a pod let in counts until the count
// no longer needs it — a create once the API server lists it (counted
// there if it runs), a release once the cache shows it released or no
// longer has it — or its TTL passed; the pod itself, checked again, is not
// counted against itself.
func TestPlacesForgetWhatTheCountShows(t *testing.T) {
	type uids = map[types.UID]bool
	for _, tc := range []struct {
		name            string
		release         bool
		counted, listed uids
		self            types.UID
		after           time.Duration
		want            int32
	}{
		{name: "a create not stored yet", want: 1},
		{name: "a create checked again", self: "p", want: 0},
		{name: "a create stored, running", counted: uids{"p": true}, listed: uids{"p": true}, want: 0},
		{name: "a create stored, ended", listed: uids{"p": true}, want: 0},
		{name: "a create never listed, past its TTL", after: createTTL + time.Second, want: 0},
		{name: "a release the cache still shows gated", release: true, listed: uids{"p": true}, want: 1},
		{name: "a release the cache shows released", release: true, counted: uids{"p": true}, listed: uids{"p": true}, want: 0},
		{name: "a release of a pod gone", release: true, want: 0},
		{name: "a release still gated in the cache within its TTL", release: true, listed: uids{"p": true}, after: createTTL + time.Second, want: 1},
		{name: "a release past its TTL", release: true, listed: uids{"p": true}, after: releaseTTL + time.Second, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			p := &Places{now: func() time.Time { return now }}
			k := placeKey{namespace: "ns", workload: "w", podSet: "main"}
			s := p.hold(k)
			p.let(s, "p", tc.release)
			now = now.Add(tc.after)
			if got := p.pending(s, tc.counted, tc.listed, tc.self); got != tc.want {
				t.Fatalf("%d pending, want %d", got, tc.want)
			}
			p.release(k, s)
			if tc.want == 0 && tc.self == "" && len(p.sets) != 0 {
				t.Fatalf("a pod set with nothing let in is kept: %v", p.sets)
			}
		})
	}
}
