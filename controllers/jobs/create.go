package jobs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// createWorkload holds a new job and creates its Workload. A gang that
// still lacks members is looked at again once its grace is over, and only
// then reported (Options.IncompleteGrace).
func (r *Reconciler) createWorkload(ctx context.Context, g gang) (reconcile.Result, error) {
	job, obj := g.job, g.job.Object()
	if finished, _, _ := job.Finished(); finished || !obj.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil
	}
	if !job.IsSuspended() {
		job.Suspend()
		if err := r.write(ctx, job); err != nil {
			return reconcile.Result{}, fmt.Errorf("suspending %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventSuspended, "Suspend", "suspended until berth admits it")
	}
	wl, res, err := r.newWorkload(ctx, g)
	if wl == nil {
		return res, err
	}
	if err := r.client.Create(ctx, wl); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("creating workload for %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	r.created.add(client.ObjectKeyFromObject(wl), r.opts.Clock.Now())
	// Created from the gang just read: the Workload's first event needs
	// no second read.
	r.memo.inStepNow(job, wl)
	if !quiet(job) {
		r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventCreatedWorkload, "Queue", "queued as workload %s", wl.Name)
	}
	return reconcile.Result{}, nil
}

// newWorkload is the Workload of a gang, not created. A nil Workload
// comes with what to return instead: a gang that still lacks members is
// looked at again once its grace is over (Options.IncompleteGrace), one
// that cannot be queued is reported.
func (r *Reconciler) newWorkload(ctx context.Context, g gang) (*berthv1.Workload, reconcile.Result, error) {
	job, obj := g.job, g.job.Object()
	spec, err := r.spec(ctx, job)
	if err != nil {
		if wait := r.incompleteWait(obj, err); wait > 0 {
			return nil, reconcile.Result{RequeueAfter: wait}, nil
		}
		return nil, reconcile.Result{}, r.invalid(job, nil, err)
	}
	wl := &berthv1.Workload{
		// The finalizer keeps the Workload, and its quota, until the job's
		// pods are gone (see the workload controller).
		ObjectMeta: metav1.ObjectMeta{Name: g.workload, Namespace: obj.GetNamespace(), Finalizers: []string{berthv1.WorkloadFinalizer}},
		Spec: berthv1.WorkloadSpec{
			QueueName:         obj.GetLabels()[berthv1.QueueNameLabel],
			PodSets:           spec.podSets,
			Priority:          spec.priority,
			PriorityClassName: spec.priorityClassName,
			Topology:          spec.topology,
		},
	}
	if err := r.setOwners(g, wl); err != nil {
		return nil, reconcile.Result{}, err
	}
	return wl, reconcile.Result{}, nil
}
