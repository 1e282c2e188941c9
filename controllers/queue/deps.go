package queue

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
	"github.com/berth-dev/berth/controllers/scheduler"
)

// Store is what the queue reconcilers read and write through the cached
// client: queues, flavors, namespaces and workloads (by the workload
// package's indexes), and queue status. The manager's client implements
// it.
type Store interface {
	client.Reader
	Status() client.SubResourceWriter
}

// ClusterQueueEngine is the part of the admission engine the ClusterQueue
// reconciler feeds and reads; *scheduler.Scheduler implements it.
type ClusterQueueEngine interface {
	UpsertClusterQueue(cq *berthv1.ClusterQueue, flavors lifecycle.QueueFlavors, hold bool) error
	DeleteClusterQueue(name string)
	ClusterQueueStatus(name string) (scheduler.QueueStatus, bool)
}

// ClusterQueueMetrics are the series the ClusterQueue reconciler sets;
// *metrics.Queues implements them.
type ClusterQueueMetrics interface {
	ReportClusterQueue(r metrics.ClusterQueueReport)
	ForgetClusterQueue(name string)
}

// LocalQueueEngine gives a LocalQueue's counts from the scheduler's own
// tally, feeds the engine the admitted workloads of a drained queue, and
// its replicas without a Workload when the queue changes;
// *scheduler.Scheduler implements it.
type LocalQueueEngine interface {
	LocalQueueCounts(namespace, name string) scheduler.LocalQueueCounts
	Sync(ctx context.Context, wl *berthv1.Workload) error
	// ResyncRecords feeds the engine the queue's replicas that have no
	// Workload again, with the queue's facts as they are now.
	ResyncRecords(ctx context.Context, namespace, queue string) error
}

// LocalQueueMetrics are the series the LocalQueue reconciler sets;
// *metrics.Queues implements them.
type LocalQueueMetrics interface {
	ReportLocalQueue(namespace, name string, pending, admitted int)
	ForgetLocalQueue(namespace, name string)
}
