package jobs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// EventDequeued is the reason of the event about a job whose Workload was
// deleted because the job cannot be queued as it is now.
const EventDequeued = "Dequeued"

// dequeue deletes the Workload of a job that cannot be queued as it is now
// and runs no pod, after saying why. A Workload exists only for a job berth
// could admit as it is — createWorkload makes one again once the job is
// valid — so the engine never admits, and berth never starts, the last
// valid spec of a job that changed into one berth cannot read: a pod group
// that lost a member would otherwise start partly, on quota for pods it no
// longer has. Any quota the Workload held goes with it. The delete is
// conditional on the version read, so an admission written meanwhile is
// looked at again rather than deleted unseen. Errors other than an invalid
// job are returned as they are.
func (r *Reconciler) dequeue(ctx context.Context, job GenericJob, wl *berthv1.Workload, cause error) error {
	if !isInvalid(cause) {
		return cause
	}
	if err := r.invalid(job, wl, cause); err != nil {
		return err
	}
	uid, version := wl.UID, wl.ResourceVersion
	err := r.client.Delete(ctx, wl, client.Preconditions{UID: &uid, ResourceVersion: &version})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting workload %s of a job that cannot be queued as it is: %w", wl.Name, err)
	}
	r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, EventDequeued, "Queue",
		"workload %s deleted: the job is queued again once it can be", wl.Name)
	return nil
}
