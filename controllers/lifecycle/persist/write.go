// Package persist writes what package lifecycle decides: it applies a
// lifecycle transition to a Workload and writes the status through a
// client, and counts the pods that still run on a Workload's quota. It is
// the only part of the lifecycle that talks to the API server, so that
// lifecycle itself stays pure and testable without one.
package persist

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// Writer writes lifecycle transitions to the API server. Several controllers write
// the same status, so each write is a merge patch guarded by the
// resourceVersion it was computed from; on a conflict the workload is read
// again with Reader (pass an uncached reader, so the retry sees the latest
// version) and the transition applied afresh — where it may now be
// refused. A transition that changes nothing writes nothing.
type Writer struct {
	// Client writes status.
	Client StatusClient
	// Reader re-reads a workload after a conflict.
	Reader client.Reader
	// Clock stamps the conditions' transition times.
	Clock clock.PassiveClock
}

// StatusClient writes the status subresource; a client.Client is one.
type StatusClient interface {
	Status() client.SubResourceWriter
}

// Write applies t to wl and writes the status if it changed. It returns
// whether a write happened; wl holds the latest object it saw (the written
// one after a write). A refused transition is no error: it returns false
// and, through Refused, why.
func (w Writer) Write(ctx context.Context, wl *berthv1.Workload, t lifecycle.Transition) (bool, error) {
	written := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		base := wl.DeepCopy()
		if err := lifecycle.Apply(wl, t, metav1.NewTime(w.Clock.Now())); err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(base.Status, wl.Status) {
			return nil
		}
		err := w.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			fresh := &berthv1.Workload{}
			if gerr := w.Reader.Get(ctx, client.ObjectKeyFromObject(wl), fresh); gerr != nil {
				return fmt.Errorf("re-reading workload after conflict: %w", gerr)
			}
			*wl = *fresh
			return err
		}
		if err != nil {
			*wl = *base
			return err
		}
		written = true
		return nil
	})
	var refused *lifecycle.RefusedError
	if errors.As(err, &refused) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s on workload %s/%s: %w", t.Name(), wl.Namespace, wl.Name, err)
	}
	return written, nil
}
