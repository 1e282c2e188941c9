package workload

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/scheduler"
)

// Store is what the reconciler reads and writes through the cached client:
// Workloads (and, for the watches, LocalQueues), the Workload's finalizer
// and status, and the deletion of an orphaned Workload. The manager's
// client implements it.
type Store interface {
	client.Reader
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
	Status() client.SubResourceWriter
}

// Engine is the part of the admission engine the reconciler feeds;
// *scheduler.Scheduler implements it.
type Engine interface {
	// SyncWorkload feeds wl to the engine, with the facts of its queues,
	// and says why the engine refused its spec, if it did.
	SyncWorkload(ctx context.Context, wl *berthv1.Workload) (*scheduler.Unqueueable, error)
	// DeleteWorkload forgets a workload, releasing its quota.
	DeleteWorkload(key admission.WorkloadKey)
}
