package provisioning

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Store is what the Workload reconciler reads and writes through the
// cached client: Workloads and their status, ResourceFlavors,
// ProvisioningRequests and their PodTemplates, which it creates owned by
// the Workload (hence the scheme). The manager's client implements it.
type Store interface {
	client.Reader
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
	Status() client.SubResourceWriter
	Scheme() *runtime.Scheme
}

// Availability says whether the cluster serves the ProvisioningRequest
// API; apiState implements it.
type Availability interface {
	Available() bool
}
