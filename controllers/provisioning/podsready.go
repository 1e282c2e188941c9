package provisioning

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/workloadstatus"
)

// ConditionPodsReady is the Workload condition that records that every pod
// of a gang admitted through a booking was Ready in time: True (reason
// PodsReady) once they were, False (reason PodsNotReady) when the gang was
// evicted because they were not.
const ConditionPodsReady = "PodsReady"

// ReasonPodsReady is the reason of PodsReady=True.
const ReasonPodsReady = "PodsReady"

// gangPods lists the pods that consume the workload's request. berth
// caches only queue-labelled pods, so they are read from the API server;
// this happens once per admission (at the deadline) and for an expired
// booking.
func (r *Reconciler) gangPods(ctx context.Context, wl *berthv1.Workload) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.reader.List(ctx, pods, client.InNamespace(wl.Namespace)); err != nil {
		return nil, fmt.Errorf("listing pods in %s: %w", wl.Namespace, err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Annotations[autoscalingv1.ProvisioningRequestPodAnnotationKey] == wl.Status.Provisioning.RequestName {
			out = append(out, p)
		}
	}
	return out, nil
}

// consumed reports whether a pod of the gang carries the consume
// annotation of the workload's request.
func (r *Reconciler) consumed(ctx context.Context, wl *berthv1.Workload) (bool, error) {
	pods, err := r.gangPods(ctx, wl)
	return len(pods) > 0, err
}

// CountReady counts the pods that are Ready, or that already succeeded, and
// are not being deleted.
func CountReady(pods []corev1.Pod) int32 {
	var n int32
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded {
			n++
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
				break
			}
		}
	}
	return n
}

// gangSize is the total count of the workload's pod sets.
func gangSize(wl *berthv1.Workload) int32 {
	var n int32
	for _, ps := range wl.Spec.PodSets {
		n += ps.Count
	}
	return n
}

// readyRecorded reports whether PodsReady=True was recorded for the current
// admission (not before it).
func readyRecorded(wl *berthv1.Workload) bool {
	ready := meta.FindStatusCondition(wl.Status.Conditions, ConditionPodsReady)
	admitted := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionAdmitted)
	return ready != nil && admitted != nil && ready.Status == metav1.ConditionTrue &&
		!ready.LastTransitionTime.Before(&admitted.LastTransitionTime)
}

// checkPodsReady evicts a gang admitted through a booking whose pods are
// not all Ready podsReadySeconds after admission; before the deadline it
// asks to be reconciled at the deadline.
func (r *Reconciler) checkPodsReady(ctx context.Context, wl *berthv1.Workload, rf *berthv1.ResourceFlavor) (reconcile.Result, error) {
	admitted := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionAdmitted)
	if admitted == nil || readyRecorded(wl) {
		return reconcile.Result{}, nil
	}
	pol := rf.Spec.Provisioning
	deadline := PodsReadyDeadline(pol, admitted.LastTransitionTime.Time)
	if deadline.IsZero() {
		return reconcile.Result{}, nil
	}
	if now := r.clock.Now(); now.Before(deadline) {
		return reconcile.Result{RequeueAfter: deadline.Sub(now)}, nil
	}
	pods, err := r.gangPods(ctx, wl)
	if err != nil {
		return reconcile.Result{}, err
	}
	ready, total := CountReady(pods), gangSize(wl)
	var msg string
	evict := ready < total
	_, err = workloadstatus.Patch(ctx, r.client, r.reader, wl, func(w *berthv1.Workload) bool {
		if !workloadstatus.IsAdmitted(w) || readyRecorded(w) {
			return false
		}
		now := r.clock.Now()
		if !evict {
			// A fresh transition time: PodsReady of an earlier admission
			// must not count for this one.
			meta.RemoveStatusCondition(&w.Status.Conditions, ConditionPodsReady)
			SetCondition(w, ConditionPodsReady, metav1.ConditionTrue, ReasonPodsReady, fmt.Sprintf("all %d pods were Ready in time", total), now)
			return true
		}
		msg = fmt.Sprintf("%d of %d pods were Ready %s after admission (podsReadySeconds %d)",
			ready, total, time.Duration(pol.PodsReadySeconds)*time.Second, pol.PodsReadySeconds)
		SetCondition(w, ConditionPodsReady, metav1.ConditionFalse, berthv1.ReasonPodsNotReady, msg, now)
		msg = Eviction(w, "", berthv1.ReasonPodsNotReady, msg, pol, now)
		return true
	})
	if err == nil && evict && msg != "" {
		r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, EventPodsNotReady, "Evict", "%s", msg)
	}
	return reconcile.Result{}, err
}
