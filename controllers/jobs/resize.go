package jobs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// EventResized is the reason of events about a job whose size changed.
const EventResized = lifecycle.EventResized

// resize is resizeRunning for a caller that does not requeue (a replica
// that runs on its record, a gang of one pod).
func (r *Reconciler) resize(ctx context.Context, job GenericJob, wl *berthv1.Workload) (bool, error) {
	stop, _, err := r.resizeRunning(ctx, job, wl)
	return stop, err
}

// resizeRunning keeps the workload of a running job in step with the job,
// and reports whether the job is to stop, or to release none of its gated
// pods (one of them claims what berth cannot count), and how long to wait
// before looking at the job again. A job that shrank keeps running and its
// workload is shrunk, which releases the quota of the pods it no longer
// runs as they end (shrink). A job that grew — more pods, or pods that
// request more, as a LeaderWorkerSet rolling update to larger GPUs does, or a pod
// group whose replacement member asks for more — is a larger gang: quota
// for all of it must be admitted together, so the engine is told and
// evicts its workload (the job is stopped and queued again at its new
// size), never run half on the old admission.
func (r *Reconciler) resizeRunning(ctx context.Context, job GenericJob, wl *berthv1.Workload) (bool, time.Duration, error) {
	if r.memo.unchanged(job, wl) {
		return false, 0, nil
	}
	r.memo.forget(wl.Namespace, wl.Name)
	spec, err := r.spec(ctx, job)
	if err != nil {
		switch {
		case gangBroken(job, err):
			return true, 0, r.evictInvalid(job, wl, err)
		case isUncounted(err) && job.IsSuspended():
			// A gated pod whose claims cannot be counted stays gated: once
			// released it would run with whatever they come to claim.
			return true, 0, r.invalid(job, wl, err)
		}
		return false, 0, nil //nolint:nilerr // a running job keeps its quota until it ends
	}
	grew, shrank := compareSize(wl.Spec.PodSets, spec.podSets)
	moved := ""
	if grew == "" {
		if moved, err = r.templateChanged(ctx, job, wl, spec.podSets); err != nil {
			return false, 0, err
		}
	}
	switch {
	case grew != "":
		r.opts.Changes.ReportChange(lifecycle.KeyOf(wl), admission.Change{Kind: admission.ChangeGrew, Detail: grew}, job.Object())
		return true, 0, nil
	case moved != "":
		r.opts.Changes.ReportChange(lifecycle.KeyOf(wl), admission.Change{Kind: admission.ChangeMoved, Detail: moved}, job.Object())
		return true, 0, nil
	case shrank:
		wait, err := r.shrink(ctx, job, wl, spec.podSets)
		return false, wait, err
	}
	r.memo.inStepIf(spec, job, wl)
	return false, 0, nil
}

// compareSize says how pod sets changed: a description of the first growth
// (more pods, a larger request of a resource, or a new one), and whether
// any pod set runs fewer pods. Pod sets that differ by name count as grown.
func compareSize(old, now []berthv1.PodSet) (string, bool) {
	if len(old) != len(now) {
		return fmt.Sprintf("%d pod sets, admitted for %d", len(now), len(old)), false
	}
	shrank := false
	for i := range now {
		o, n := old[i], now[i]
		if o.Name != n.Name {
			return fmt.Sprintf("pod set %q is now %q", o.Name, n.Name), false
		}
		if n.Count > o.Count {
			return fmt.Sprintf("pod set %s: %d pods, admitted for %d", n.Name, n.Count, o.Count), false
		}
		for _, res := range slices.Sorted(maps.Keys(n.Requests)) {
			q := n.Requests[res]
			if was, ok := o.Requests[res]; !ok || q.Cmp(was) > 0 {
				return fmt.Sprintf("pod set %s: %s %s per pod, admitted for %s", n.Name, q.String(), res, was.String()), false
			}
		}
		shrank = shrank || n.Count < o.Count
	}
	return "", shrank
}

// templateChanged names the first pod set of a running job whose template
// no longer matches its admitted Workload's, "" when none. The pods of a
// started gang carry what berth added (the flavors' labels and tolerations,
// the domain pin), which kinds whose template is read from the pods
// themselves report as theirs: those additions are left out of both sides.
func (r *Reconciler) templateChanged(ctx context.Context, job GenericJob, wl *berthv1.Workload, now []berthv1.PodSet) (string, error) {
	if wl.Status.Admission == nil {
		return "", nil
	}
	added, missing, err := r.admittedScheduling(ctx, job, wl)
	if err != nil || missing != "" {
		return "", err
	}
	byName := map[string]PodSetScheduling{}
	for _, s := range added {
		byName[s.Name] = s
	}
	for i := range now {
		o, n := wl.Spec.PodSets[i].Template, now[i].Template
		if o == nil {
			continue // admitted before berth kept templates
		}
		if !equality.Semantic.DeepEqual(withoutAdded(o, byName[now[i].Name]), withoutAdded(n, byName[now[i].Name])) {
			return now[i].Name, nil
		}
	}
	return "", nil
}

// BindingLabels are the labels the API server's PodTopologyLabels
// admission plugin (beta and on by default since Kubernetes 1.35) copies
// from the node onto a pod when it is bound: a pod that is its own job
// (a pod group's member, a Deployment's or StatefulSet's replica) gains
// them by running, not because anyone changed where it may run.
var BindingLabels = []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion}

// withoutAdded is a template without the node selector entries and
// tolerations berth adds when it starts the pod set, and without the
// labels binding adds to a pod.
func withoutAdded(t *berthv1.PodSetTemplate, added PodSetScheduling) *berthv1.PodSetTemplate {
	if t == nil {
		return nil
	}
	out := t.DeepCopy()
	for _, k := range BindingLabels {
		delete(out.Labels, k)
	}
	if len(out.Labels) == 0 {
		out.Labels = nil
	}
	for k, v := range added.NodeSelector {
		if out.Spec.NodeSelector[k] == v {
			delete(out.Spec.NodeSelector, k)
		}
	}
	out.Spec.Tolerations = slices.DeleteFunc(out.Spec.Tolerations, func(t corev1.Toleration) bool {
		return slices.ContainsFunc(added.Tolerations, func(a corev1.Toleration) bool { return equality.Semantic.DeepEqual(a, t) })
	})
	if len(out.Spec.NodeSelector) == 0 {
		out.Spec.NodeSelector = nil
	}
	if len(out.Spec.Tolerations) == 0 {
		out.Spec.Tolerations = nil
	}
	return out
}

// gangBroken reports whether a running gang of pods can no longer be read
// as a gang (err is why): its pods disagree on what the gang is, so the
// admission no longer describes the pods berth would release. A gang that
// only lacks members waits for them on its admission, and a job whose
// reference went away (a PriorityClass deleted) or that its own controller
// runs (a Job, a JobSet: no pod is released one by one) keeps running on
// the quota it was given.
func gangBroken(job GenericJob, err error) bool {
	if _, pods := job.(Writer); !pods || isIncomplete(err) {
		return false
	}
	_, psErr := job.PodSets()
	return psErr != nil
}

// evictInvalid stops a running job that berth can no longer read as a gang
// (its pods disagree on the group's count, say): releasing more of its
// pods would run them on an admission that no longer describes them, so the
// engine is told and evicts it; it is queued again whole, and dequeued until
// it is valid. Errors other than an invalid job are returned as they are.
func (r *Reconciler) evictInvalid(job GenericJob, wl *berthv1.Workload, cause error) error {
	if !isInvalid(cause) {
		return cause
	}
	if err := r.invalid(job, wl, cause); err != nil {
		return err
	}
	r.opts.Changes.ReportChange(lifecycle.KeyOf(wl), admission.Change{Kind: admission.ChangeInvalid, Detail: cause.Error()}, job.Object())
	return nil
}

// changedSince has the engine evict an admitted job that has not started and
// no longer matches its Workload — its size or requests changed after the
// Workload was last updated — so that it is queued again as it is, and
// reports whether it did. A job that cannot be read as it is now is never started: its
// Workload is dequeued.
func (r *Reconciler) changedSince(ctx context.Context, job GenericJob, wl *berthv1.Workload) (bool, error) {
	if r.memo.unchanged(job, wl) {
		return false, nil
	}
	r.memo.forget(wl.Namespace, wl.Name)
	spec, err := r.spec(ctx, job)
	if err != nil {
		return true, r.dequeue(ctx, job, wl, err)
	}
	if equality.Semantic.DeepEqual(spec.podSets, wl.Spec.PodSets) {
		r.memo.inStepIf(spec, job, wl)
		return false, nil
	}
	r.opts.Changes.ReportChange(lifecycle.KeyOf(wl), admission.Change{Kind: admission.ChangeBeforeStart}, job.Object())
	return true, nil
}

// shrink lowers the counts of an admitted workload towards its job's, and
// returns how long to wait before looking at it again. The job's
// controller deletes the pods beyond the job's new size, and they run out
// a grace period their owner chooses (or a finalizer keeps them): a pod
// set keeps counting those of its pods that have not ended, and their
// quota is released as they end. Released before, it would admit another
// job onto the nodes they still hold.
func (r *Reconciler) shrink(ctx context.Context, job GenericJob, wl *berthv1.Workload, podSets []berthv1.PodSet) (time.Duration, error) {
	running, err := podsRunningBySet(ctx, r.reader, wl)
	if err != nil {
		return 0, err
	}
	counts := map[string]int32{}
	lowered, waiting := false, false
	for i := range podSets {
		was, now := wl.Spec.PodSets[i].Count, podSets[i].Count
		keep := min(was, max(now, running[podSets[i].Name]))
		counts[podSets[i].Name] = keep
		lowered = lowered || keep < was
		waiting = waiting || keep > now
	}
	// The admission is shrunk first, then the pod sets the engine charges:
	// the quota is freed for others only once the admission no longer
	// claims it, so no reader of the API sees two admissions claim it at
	// once. Written on every pass: an earlier one may have failed between
	// the two writes.
	if _, err := r.writer.Write(ctx, wl, lifecycle.Shrink{Counts: counts}); err != nil {
		return 0, err
	}
	if lowered {
		for i := range wl.Spec.PodSets {
			wl.Spec.PodSets[i].Count = counts[wl.Spec.PodSets[i].Name]
		}
		if err := r.client.Update(ctx, wl); err != nil {
			return 0, fmt.Errorf("shrinking workload %s: %w", wl.Name, err)
		}
	}
	switch {
	case lowered && waiting:
		r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, EventResized, "Resize",
			"shrinking: quota of the pods that ended released, kept for the removed pods that still run until they end")
	case lowered:
		r.recorder.Eventf(job.Object(), wl, corev1.EventTypeNormal, EventResized, "Resize", "shrank: quota of the pods it no longer runs released")
	}
	if !waiting {
		return 0, nil
	}
	log.FromContext(ctx).V(1).Info("keeping the quota of a shrunk job's removed pods until they end", "workload", wl.Name, "counts", counts)
	return podsPoll, nil
}

// podsRunningBySet counts the pods of wl that have not ended, terminating
// ones included, by pod set: berth labels every pod it starts with the
// Workload's UID and its pod set's name. Pods a job's controller creates
// carry these labels but not the queue label, and berth caches only queued
// pods: r is an uncached reader (as for persist.PodsRunning), read only
// while a job is smaller than its workload.
func podsRunningBySet(ctx context.Context, r client.Reader, wl *berthv1.Workload) (map[string]int32, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(wl.Namespace), client.MatchingLabels{berthv1.WorkloadLabel: string(wl.UID)}); err != nil {
		return nil, fmt.Errorf("listing the pods of workload %s/%s: %w", wl.Namespace, wl.Name, err)
	}
	out := map[string]int32{}
	for i := range pods.Items {
		if p := pods.Items[i].Status.Phase; p != corev1.PodSucceeded && p != corev1.PodFailed {
			out[pods.Items[i].Labels[berthv1.PodSetLabel]]++
		}
	}
	return out, nil
}
