package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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

func TestFencedClient(t *testing.T) {
	fenced := errors.New("fenced")
	webhooks := &unstructured.Unstructured{}
	webhooks.SetAPIVersion("admissionregistration.k8s.io/v1")
	webhooks.SetKind("ValidatingWebhookConfiguration")
	webhooks.SetName("berth")
	cases := []struct {
		name    string
		obj     client.Object
		allowed bool
	}{
		{name: "a Job is fenced", obj: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}}},
		{name: "a Pod is fenced", obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}},
		{name: "the certificate Secret is not", obj: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}, allowed: true},
		{name: "unstructured webhook configurations are not", obj: webhooks, allowed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Fenced(fake.NewClientBuilder().Build(), func() error { return fenced })
			err := c.Create(context.Background(), tc.obj)
			if got := !errors.Is(err, fenced); got != tc.allowed {
				t.Fatalf("Create() = %v, want allowed %v", err, tc.allowed)
			}
			if err := c.Delete(context.Background(), tc.obj); errors.Is(err, fenced) == tc.allowed {
				t.Fatalf("Delete() = %v, want allowed %v", err, tc.allowed)
			}
		})
	}
}
