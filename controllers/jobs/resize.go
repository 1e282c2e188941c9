package jobs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/workloadstatus"
)

// EventResized is the reason of events about a running job whose size
// changed.
const EventResized = "Resized"

// ReasonResized is the Evicted condition's reason for a running job that
// grew: it is stopped and queued again whole at its new size.
const ReasonResized = "Resized"

// resize keeps the workload of a running job in step with the job's size.
// A job that shrank keeps running and its workload is shrunk, which
// releases the quota of the pods it no longer runs. A job that grew is a
// larger gang: quota for all of it must be admitted together, so its
// workload is evicted (the job is suspended and queued again at the new
// size), never started half-way.
func (r *Reconciler) resize(ctx context.Context, job GenericJob, wl *berthv1.Workload) error {
	podSets, err := job.PodSets()
	if err != nil || len(podSets) != len(wl.Spec.PodSets) {
		return nil //nolint:nilerr // an invalid running job keeps its quota until it ends
	}
	grew, shrank := false, false
	for i := range podSets {
		if podSets[i].Name != wl.Spec.PodSets[i].Name {
			return nil
		}
		grew = grew || podSets[i].Count > wl.Spec.PodSets[i].Count
		shrank = shrank || podSets[i].Count < wl.Spec.PodSets[i].Count
	}
	obj := job.Object()
	switch {
	case grew:
		_, err := workloadstatus.Patch(ctx, r.client, r.client, wl, func(w *berthv1.Workload) bool {
			return workloadstatus.IsAdmitted(w) && workloadstatus.SetCondition(w, berthv1.ConditionEvicted, metav1.ConditionTrue,
				ReasonResized, "the job grew: it is queued again for its new size")
		})
		if err != nil {
			return err
		}
		r.recorder.Eventf(obj, wl, corev1.EventTypeNormal, EventResized, "Resize", "grew: stopped and queued again for all of its pods")
		return nil
	case shrank:
		return r.shrink(ctx, job, wl, podSets)
	}
	return nil
}

// shrink lowers the counts of an admitted workload to its job's.
func (r *Reconciler) shrink(ctx context.Context, job GenericJob, wl *berthv1.Workload, podSets []berthv1.PodSet) error {
	for i := range podSets {
		wl.Spec.PodSets[i].Count = podSets[i].Count
	}
	if err := r.client.Update(ctx, wl); err != nil {
		return fmt.Errorf("shrinking workload %s: %w", wl.Name, err)
	}
	counts := map[string]int32{}
	for _, ps := range podSets {
		counts[ps.Name] = ps.Count
	}
	if _, err := workloadstatus.Patch(ctx, r.client, r.client, wl, func(w *berthv1.Workload) bool {
		if w.Status.Admission == nil {
			return false
		}
		for i, psa := range w.Status.Admission.PodSetAssignments {
			if c, ok := counts[psa.Name]; ok && c < psa.Count {
				w.Status.Admission.PodSetAssignments[i].Count = c
			}
		}
		return true
	}); err != nil {
		return err
	}
	r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, EventResized, "Resize", "shrank: quota of the pods it no longer runs released")
	return nil
}
