package provisioning

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// gangPods lists the pods of the workload's gang that consume its request:
// those berth started for the workload (labelled with its UID) carrying the
// request's consume annotation. berth caches only queue-labelled pods, so
// they are read from the API server; this happens once per admission (at
// the deadline) and for an expired booking.
func (r *Reconciler) gangPods(ctx context.Context, wl *berthv1.Workload) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.reader.List(ctx, pods, client.InNamespace(wl.Namespace), client.MatchingLabels{berthv1.WorkloadLabel: string(wl.UID)}); err != nil {
		return nil, fmt.Errorf("listing the pods of workload %s: %w", wl.Name, err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Annotations[autoscalingv1.ProvisioningRequestPodAnnotationKey] == wl.Status.Provisioning.RequestName {
			out = append(out, p)
		}
	}
	return out, nil
}

// consumed reports whether a pod of the gang was bound on the booking, as
// the autoscaler counts consumption: a pod that carries the consume
// annotation but never got a node (the nodes of a partial delivery that
// never joined) used nothing.
func (r *Reconciler) consumed(ctx context.Context, wl *berthv1.Workload) (bool, error) {
	pods, err := r.gangPods(ctx, wl)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }), nil
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

// PodsReadyDeadline is when every pod of a gang admitted at admittedAt must
// be Ready; zero when the check is off.
func PodsReadyDeadline(pol *berthv1.ProvisioningPolicy, admittedAt time.Time) time.Time {
	if pol == nil || pol.PodsReadySeconds <= 0 || admittedAt.IsZero() {
		return time.Time{}
	}
	return admittedAt.Add(time.Duration(pol.PodsReadySeconds) * time.Second)
}

// checkPodsReady counts, at the deadline, the Ready pods of a gang admitted
// on booked capacity and reports the count to the engine, which decides:
// all Ready, the scheduler records PodsReady (and the gang is not checked
// again for this admission); otherwise it evicts the gang. Before the
// deadline it asks to be reconciled at the deadline.
func (r *Reconciler) checkPodsReady(ctx context.Context, wl *berthv1.Workload, rf *berthv1.ResourceFlavor) (reconcile.Result, error) {
	admitted := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionAdmitted)
	if admitted == nil || lifecycle.PhaseOf(wl) != lifecycle.Admitted {
		return reconcile.Result{}, nil // Running: recorded already
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
	r.reporter.ReportBooking(admission.WorkloadKey{Namespace: wl.Namespace, Name: wl.Name}, admission.BookingReport{
		Attempt: wl.Status.Provisioning.Attempt, Answer: admission.AnswerPodsCounted,
		Ready: CountReady(pods), Deadline: deadline.UnixNano(), ReadySeconds: int64(pol.PodsReadySeconds),
	})
	return reconcile.Result{}, nil
}
