package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// readBack is how hard an ambiguous write is read back before the
// decision is parked for a later resolution: about 3 s.
var readBack = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 5}

// resolveEvery is how often a parked decision is read back again.
const resolveEvery = 2 * time.Second

// errUnresolved says that a write may or may not have happened and that
// reading the object back failed too: the engine must keep the decision
// as it is (neither confirm nor roll it back) until it is resolved.
var errUnresolved = errors.New("the write's outcome is unknown")

// ambiguous reports whether a failed write may still have been committed:
// a timeout, a dropped connection, a server error. The API server rejects
// the others before it writes anything.
func ambiguous(err error) bool {
	switch {
	case err == nil, apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsInvalid(err),
		apierrors.IsBadRequest(err), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err),
		apierrors.IsAlreadyExists(err), apierrors.IsGone(err), apierrors.IsTooManyRequests(err),
		apierrors.IsRequestEntityTooLargeError(err), apierrors.IsMethodNotSupported(err),
		apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err):
		return false
	}
	return true
}

// committed reports whether a freshly read workload shows a decision.
type committed func(fresh *berthv1.Workload) bool

// write carries out a transition that persists an engine decision. A
// definite failure returns its error; an ambiguous one is resolved by an
// uncached read before the caller rolls anything back: if the workload
// shows the decision, the write happened. When the read fails too it
// returns errUnresolved, and the caller parks the decision (park).
func (s *Scheduler) write(ctx context.Context, wl *berthv1.Workload, t lifecycle.Transition, done committed) (bool, error) {
	written, err := s.writer.Write(ctx, wl, t)
	if !ambiguous(err) {
		return written, err
	}
	fresh, rerr := s.readBack(ctx, client.ObjectKeyFromObject(wl))
	switch {
	case apierrors.IsNotFound(rerr):
		return false, rerr
	case rerr != nil:
		return false, fmt.Errorf("%w: %w (reading it back: %w)", errUnresolved, err, rerr)
	}
	*wl = *fresh
	if done(fresh) {
		log.FromContext(ctx).Info("a write that failed ambiguously was committed", "workload", client.ObjectKeyFromObject(wl), "error", err.Error())
		return true, nil
	}
	return false, err
}

// decision is one engine decision about one workload, as it is written.
type decision struct {
	key        admission.WorkloadKey
	transition lifecycle.Transition
	done       committed
	// what names the decision in logs.
	what string
	// onWritten records a decision the API server took, on the workload
	// as written.
	onWritten func(*berthv1.Workload)
	// undo gives the decision back to the engine, to be decided again.
	undo func()
}

// commit writes a decision and settles it the one way every decision is
// settled: written, it is recorded; failed or refused, it goes back to the
// engine; of unknown outcome, it is parked until a read says which.
func (s *Scheduler) commit(ctx context.Context, wl *berthv1.Workload, d decision) {
	written, err := s.write(ctx, wl, d.transition, d.done)
	switch {
	case errors.Is(err, errUnresolved):
		s.park(ctx, d.key, d.done, d.onWritten, d.undo)
	case err != nil:
		d.undo()
		logWriteError(ctx, err, "writing "+d.what, d.key)
	case !written:
		// The workload moved on (admitted, finished, deleted or changed since
		// the decision): let the engine see its real state.
		d.undo()
		_ = s.Sync(ctx, wl)
	default:
		d.onWritten(wl)
	}
}

// readBack reads a workload from the API server, retrying for a while.
func (s *Scheduler) readBack(ctx context.Context, key client.ObjectKey) (*berthv1.Workload, error) {
	fresh := &berthv1.Workload{}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, readBack, func(ctx context.Context) (bool, error) {
		last = s.reader.Get(ctx, key, fresh)
		if apierrors.IsNotFound(last) {
			return false, last
		}
		return last == nil, nil
	})
	if err != nil && last != nil {
		return nil, last
	}
	return fresh, err
}

// park keeps resolving a decision whose write's outcome is unknown, until
// a read shows whether it happened: then onCommitted or the engine's
// Rollback runs. Meanwhile the engine keeps the decision, so the quota it
// gave is counted, and never given twice.
func (s *Scheduler) park(ctx context.Context, key admission.WorkloadKey, done committed, onCommitted func(*berthv1.Workload), rollback func()) {
	log.FromContext(ctx).Info("the outcome of a write is unknown; keeping the decision until it is read back", "workload", key)
	var try func()
	try = func() {
		if ctx.Err() != nil {
			return
		}
		fresh, err := s.readBack(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name})
		switch {
		case apierrors.IsNotFound(err):
			s.DeleteWorkload(key)
		case err != nil:
			time.AfterFunc(resolveEvery, try)
		case done(fresh):
			onCommitted(fresh)
		default:
			rollback()
			_ = s.Sync(ctx, fresh)
		}
	}
	time.AfterFunc(resolveEvery, try)
}
