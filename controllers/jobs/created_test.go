package jobs

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func TestCreatedWorkloads(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	a := types.NamespacedName{Namespace: "team-a", Name: "pod-group-r1-abcde"}
	b := types.NamespacedName{Namespace: "team-a", Name: "pod-group-r2-abcde"}
	// A step acts on the record at its time; want is unseen(a) then.
	type step struct {
		at   time.Duration
		do   func(c *createdWorkloads, now time.Time)
		want bool
	}
	add := func(k types.NamespacedName) func(*createdWorkloads, time.Time) {
		return func(c *createdWorkloads, now time.Time) { c.add(k, now) }
	}
	seen := func(c *createdWorkloads, _ time.Time) { c.seen(a) }
	tests := []struct {
		name  string
		steps []step
	}{
		{"never created", []step{{0, func(*createdWorkloads, time.Time) {}, false}}},
		{"created, not seen yet", []step{{0, add(a), true}}},
		{"created, then seen", []step{{0, add(a), true}, {time.Second, seen, false}}},
		{"another gang's record is not this one's", []step{{0, add(b), false}}},
		{"created again after it was seen", []step{{0, add(a), true}, {time.Second, seen, false}, {time.Minute, add(a), true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &createdWorkloads{}
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				s.do(c, now)
				if got := c.unseen(a, now); got != s.want {
					t.Fatalf("step %d: unseen = %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

func TestCreatedWorkloadsExpire(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "team-a", Name: "job-train-abcde"}
	tests := []struct {
		name  string
		after time.Duration
		want  bool
	}{
		{"at creation", 0, true},
		{"just before the TTL", createdTTL - time.Nanosecond, true},
		{"at the TTL: created again, as the cache says", createdTTL, false},
		{"long after", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &createdWorkloads{}
			c.add(key, t0)
			if got := c.unseen(key, t0.Add(tt.after)); got != tt.want {
				t.Fatalf("unseen after %s = %v, want %v", tt.after, got, tt.want)
			}
			if !tt.want && c.len() != 0 {
				t.Fatalf("an expired record is kept: %d left", c.len())
			}
		})
	}
}

// TestCreatedWorkloadsPrune: records the cache never confirms (a Workload
// deleted before it was seen) do not pile up past createdPrune.
func TestCreatedWorkloadsPrune(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	c := &createdWorkloads{}
	for i := range createdPrune {
		c.add(types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("old-%d", i)}, t0)
	}
	fresh := types.NamespacedName{Namespace: "ns", Name: "fresh"}
	c.add(fresh, t0.Add(createdTTL))
	if got := c.len(); got != 1 {
		t.Fatalf("records after pruning = %d, want 1 (the fresh one)", got)
	}
	if !c.unseen(fresh, t0.Add(createdTTL+time.Second)) {
		t.Fatal("the fresh record was pruned")
	}
}

// podKind is a resolved kind for the test below: its gangs are keyed, and
// their Workloads named by key (KeyWorkloadName).
type podKind struct{}

func (podKind) GVK() schema.GroupVersionKind  { return corev1.SchemeGroupVersion.WithKind("Pod") }
func (podKind) NewObject() client.Object      { return &corev1.Pod{} }
func (podKind) Wrap(client.Object) GenericJob { return nil }

// TestGoneGangForgetsItsCreatedWorkload: a gang whose objects are all gone
// drops the record of its Workload, whether or not the cache has shown the
// Workload yet, so a gang of the same key that comes back at once gets its
// Workload created again rather than waiting out createdTTL.
func TestGoneGangForgetsItsCreatedWorkload(t *testing.T) {
	name := KeyWorkloadName("Pod", "team", "r00001")
	key := types.NamespacedName{Namespace: "team", Name: name}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		inCache bool
	}{
		{"the cache shows the Workload", true},
		{"the cache does not show it yet", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(handOffScheme(t))
			if tt.inCache {
				b = b.WithObjects(&berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name,
					Labels: map[string]string{berthv1.JobKeyLabel: "r00001"}}})
			}
			c := b.Build()
			r := &Reconciler{client: c, reader: c, kind: podKind{}}
			r.created.add(key, now)
			if err := r.deleteKeyWorkloads(context.Background(), "team", "r00001"); err != nil {
				t.Fatal(err)
			}
			if r.created.unseen(key, now.Add(time.Second)) {
				t.Fatal("the gone gang's Workload is still taken as created")
			}
			err := c.Get(context.Background(), key, &berthv1.Workload{})
			if !apierrors.IsNotFound(err) {
				t.Fatalf("the gone gang's Workload was not deleted: %v", err)
			}
		})
	}
}
