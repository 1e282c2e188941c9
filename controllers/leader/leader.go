// Package leader fences berth's writes to its lease: a replica writes
// Workloads, jobs and pods only while it knows that its leader-election
// lease cannot have passed to another replica.
//
// client-go's leader election stops a leader whose renewals fail for the
// renew deadline, but a leader that is paused (SIGSTOP, a long GC or VM
// stall, a partition) notices only when it runs again, and by then the
// requests it was about to send go out at once: they would admit from a
// stale view while the new leader admits from its own. Lease wraps the
// lock and remembers when the last renewal was sent; Fence refuses writes
// once that is more than the renew deadline ago. The other replicas take
// over only a whole lease duration after they last saw the lease change,
// so the margin between the two (lease duration − renew deadline, 5 s by
// default) covers the request that renewed it and the write in flight.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lease is a Lease lock that records its own renewals. It is safe for
// concurrent use.
type Lease struct {
	resourcelock.Interface
	renewDeadline time.Duration
	now           func() time.Time

	mu        sync.Mutex
	renewedAt time.Time // when the last successful renewal was sent
}

// NewLease returns the Lease lock namespace/name for this process, with an
// identity unique to it (host name and a random suffix, as
// controller-runtime's default), whose requests time out within half the
// renew deadline so that one hung renewal cannot use it all up.
func NewLease(cfg *rest.Config, namespace, name string, renewDeadline time.Duration) (*Lease, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading the host name for the leader-election identity: %w", err)
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = renewDeadline / 2
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the leader-election client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, fmt.Errorf("creating the leader-election lock: %w", err)
	}
	return Wrap(lock, renewDeadline), nil
}

// Wrap records the renewals of lock; a renewal older than renewDeadline
// no longer fences writes in.
func Wrap(lock resourcelock.Interface, renewDeadline time.Duration) *Lease {
	return &Lease{Interface: lock, renewDeadline: renewDeadline, now: time.Now}
}

// Create takes the lock and, if it is taken for this identity, records
// the renewal.
func (l *Lease) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	if err := l.Interface.Create(ctx, ler); err != nil {
		return err
	}
	l.renewed(ler, sent)
	return nil
}

// Update renews (or releases) the lock and records a renewal for this
// identity.
func (l *Lease) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	if err := l.Interface.Update(ctx, ler); err != nil {
		return err
	}
	l.renewed(ler, sent)
	return nil
}

// renewed records a write of the lock sent at sent: a renewal when it
// names this identity, a release otherwise.
func (l *Lease) renewed(ler resourcelock.LeaderElectionRecord, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ler.HolderIdentity == l.Identity() {
		l.renewedAt = sent
	} else {
		l.renewedAt = time.Time{}
	}
}

// Fence returns nil while this replica's last renewal was sent less than
// the renew deadline ago, and an error saying how stale it is otherwise.
// The clock is monotonic: a pause of the process counts.
func (l *Lease) Fence() error {
	l.mu.Lock()
	at := l.renewedAt
	l.mu.Unlock()
	if at.IsZero() {
		return fmt.Errorf("%w: %s does not hold lease %s", ErrNotLeader, l.Identity(), l.Describe())
	}
	if age := l.now().Sub(at); age >= l.renewDeadline {
		return fmt.Errorf("%w: %s last renewed lease %s %s ago, more than the renew deadline %s",
			ErrNotLeader, l.Identity(), l.Describe(), age.Round(time.Millisecond), l.renewDeadline)
	}
	return nil
}

// ErrNotLeader is wrapped by the errors of writes fenced off.
var ErrNotLeader = errors.New("not the leader")
