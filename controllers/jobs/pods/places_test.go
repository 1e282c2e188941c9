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

// TestPlacesForgetWhatTheCountShows: a pod let in counts until the pods
// read show it (then it is counted there, once) or placeTTL passed; the pod
// itself, checked again, is not counted against itself.
func TestPlacesForgetWhatTheCountShows(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &Places{now: func() time.Time { return now }}
	k := placeKey{namespace: "ns", workload: "w", podSet: "main"}
	s := p.hold(k)
	p.let(s, "a")
	p.let(s, "b")
	for _, tc := range []struct {
		name string
		seen map[types.UID]bool
		self types.UID
		want int32
	}{
		{name: "neither shown yet", want: 2},
		{name: "b itself, checked again", self: "b", want: 1},
		{name: "a shown by the count", seen: map[types.UID]bool{"a": true}, want: 1},
	} {
		if got := p.pending(s, tc.seen, tc.self); got != tc.want {
			t.Fatalf("%s: %d pending, want %d", tc.name, got, tc.want)
		}
	}
	now = now.Add(placeTTL + time.Second)
	if got := p.pending(s, nil, ""); got != 0 {
		t.Fatalf("%d pending after placeTTL, want 0", got)
	}
	p.release(k, s)
	if len(p.sets) != 0 {
		t.Fatalf("an empty pod set is kept: %v", p.sets)
	}
}
