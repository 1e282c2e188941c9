package jobs

import (
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Store is what the job reconciler reads and writes through the cached
// client: jobs of its kind and of parent kinds, their Workloads (and the
// Workloads' status), ResourceFlavors, PriorityClasses and DRA claims, and
// the pods of kinds whose adapter writes pods itself (Writer). It sets
// owner references, hence the scheme. The manager's client implements it.
type Store interface {
	client.Reader
	client.Writer
	Status() client.SubResourceWriter
	Scheme() *runtime.Scheme
}
