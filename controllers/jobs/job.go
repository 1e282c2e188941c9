// Package jobs holds what every kind of job berth manages has in common: the
// GenericJob interface an adapter implements for its kind, and one
// reconciler that keeps a job and its Workload in step — it creates the
// Workload, keeps the job suspended until the Workload is admitted, starts it
// on the admitted flavors, stops it when the Workload is evicted, and
// reports when it finished. No kind is special-cased outside its adapter.
package jobs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// PodSetScheduling is where the pods of one pod set may run: what berth adds
// to a pod set's template when it starts the job, and what it restores when
// it stops it.
type PodSetScheduling struct {
	// Name of the pod set.
	Name string `json:"name"`
	// NodeSelector of the pod template.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the pod template.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// GenericJob is one job, of any kind, as berth sees it. Methods that change
// the job change the in-memory object only; the reconciler writes it.
type GenericJob interface {
	// Object is the job's API object.
	Object() client.Object
	// PodSets describes the job's gang: one entry per group of identical
	// pods, with per-pod requests. An error says why the job cannot be
	// queued (for example zero pods), in words a user can act on.
	PodSets() ([]berthv1.PodSet, error)
	// IsSuspended reports whether the job is held: no pods are created.
	IsSuspended() bool
	// Suspend holds the job; its pods are deleted by its own controller.
	Suspend()
	// Resume releases the job.
	Resume()
	// Scheduling returns each pod set's current node selector and
	// tolerations.
	Scheduling() []PodSetScheduling
	// SetScheduling replaces the node selector and tolerations of the
	// named pod sets.
	SetScheduling(s []PodSetScheduling)
	// IsActive reports whether any pod of the job still runs.
	IsActive() bool
	// Finished reports whether the job ended, whether it succeeded, and a
	// message for the Workload's Finished condition.
	Finished() (finished, succeeded bool, message string)
}

// Kind creates the GenericJob of one kind of job.
type Kind interface {
	// GVK of the job kind.
	GVK() schema.GroupVersionKind
	// NewObject returns an empty object of the kind, to read into.
	NewObject() client.Object
	// Wrap returns the GenericJob of an object of the kind.
	Wrap(obj client.Object) GenericJob
}
