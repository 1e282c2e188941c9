package notify

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Reasons of a pod's DisruptionTarget condition that mean it went with its
// node: the node was deleted (pod garbage collection) or became
// unreachable and its pods were evicted by the taint manager.
var nodeLostReasons = map[string]bool{"DeletionByPodGC": true, "DeletionByTaintManager": true}

// imagePullReasons are the waiting reasons of a container whose image
// cannot be pulled.
var imagePullReasons = map[string]bool{"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true}

// DetectPod compares two versions of a pod and returns what newly went
// wrong: a container restarted (OOMKilled when its last termination was
// an OOM kill), started to crash-loop or could not pull its image, or the
// pod was lost with its node. old is nil for a pod seen for the first
// time, whose existing restarts are not reported again after a restart of
// berth.
func DetectPod(old, pod *corev1.Pod, now time.Time) []Failure {
	if old == nil {
		return nil
	}
	var out []Failure
	before := map[string]corev1.ContainerStatus{}
	for _, cs := range append(old.Status.InitContainerStatuses, old.Status.ContainerStatuses...) {
		before[cs.Name] = cs
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		prev := before[cs.Name]
		base := Failure{Pod: pod.Name, Node: pod.Spec.NodeName, Container: cs.Name, Restarts: cs.RestartCount, At: now}
		if cs.RestartCount > prev.RestartCount {
			f := base
			f.Kind = Restarted
			if t := cs.LastTerminationState.Terminated; t != nil {
				f.Reason, f.ExitCode, f.Signal, f.Message = t.Reason, t.ExitCode, t.Signal, t.Message
				if t.Reason == "OOMKilled" {
					f.Kind = OOMKilled
				}
			}
			out = append(out, f)
		}
		w, pw := cs.State.Waiting, prev.State.Waiting
		if w == nil || (pw != nil && pw.Reason == w.Reason) {
			continue
		}
		f := base
		f.Reason, f.Message = w.Reason, w.Message
		switch {
		case w.Reason == "CrashLoopBackOff":
			f.Kind = CrashLoopBackOff
			out = append(out, f)
		case imagePullReasons[w.Reason] && (pw == nil || !imagePullReasons[pw.Reason]):
			f.Kind = ImagePullBackOff
			out = append(out, f)
		}
	}
	if c := podCondition(pod, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue && nodeLostReasons[c.Reason] {
		if pc := podCondition(old, corev1.DisruptionTarget); pc == nil || pc.Status != corev1.ConditionTrue {
			out = append(out, Failure{Kind: NodeLost, Pod: pod.Name, Node: pod.Spec.NodeName, Reason: c.Reason, Message: c.Message, At: now})
		}
	}
	return out
}

// Unscheduled returns an Unschedulable failure when the pod has waited to
// be scheduled for at least grace, with the scheduler's message, or nil.
func Unscheduled(pod *corev1.Pod, grace time.Duration, now time.Time) *Failure {
	c := podCondition(pod, corev1.PodScheduled)
	if pod.Spec.NodeName != "" || c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
		return nil
	}
	if now.Sub(c.LastTransitionTime.Time) < grace {
		return nil
	}
	return &Failure{Kind: Unschedulable, Pod: pod.Name, Reason: c.Reason, Message: c.Message, At: now}
}

// DetectWorkload compares two versions of a Workload and returns berth's
// own actions on the gang: an eviction (with berth's reason: Preempted,
// CapacityRevoked, BookingExpired, PodsNotReady, ...), a requeue, or a
// job that finished failed.
func DetectWorkload(old, wl *berthv1.Workload, now time.Time) []Failure {
	if old == nil {
		return nil
	}
	var out []Failure
	// Evicted stays True from the eviction to the requeue; its reason
	// moves from why (Preempted, ...) to Requeued once the pods are gone.
	c, pc := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionEvicted), meta.FindStatusCondition(old.Status.Conditions, berthv1.ConditionEvicted)
	if c != nil && c.Status == metav1.ConditionTrue && (pc == nil || pc.Status != metav1.ConditionTrue || pc.Reason != c.Reason) {
		kind := Evicted
		if c.Reason == string(berthv1.ReasonRequeued) {
			kind = Requeued
		}
		out = append(out, Failure{Kind: kind, Reason: c.Reason, Message: c.Message, At: now})
	}
	// A failed booking releases the quota: QuotaReserved turns False with
	// ProvisioningFailed (tried again later) or ProvisioningGaveUp.
	q, pq := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionQuotaReserved), meta.FindStatusCondition(old.Status.Conditions, berthv1.ConditionQuotaReserved)
	if q != nil && q.Status == metav1.ConditionFalse && (q.Reason == string(berthv1.ReasonProvisioningFailed) || q.Reason == string(berthv1.ReasonProvisioningGaveUp)) &&
		(pq == nil || pq.Status != q.Status || pq.Reason != q.Reason) {
		out = append(out, Failure{Kind: BookingFailed, Reason: q.Reason, Message: q.Message, At: now})
	}
	if c := newlyTrue(old, wl, berthv1.ConditionFinished); c != nil && c.Reason == string(berthv1.ReasonFailed) {
		out = append(out, Failure{Kind: RetriesExhausted, Reason: c.Reason, Message: c.Message, At: now})
	}
	return out
}

// newlyTrue returns wl's condition t when it is True and was not in old.
func newlyTrue(old, wl *berthv1.Workload, t string) *metav1.Condition {
	c := meta.FindStatusCondition(wl.Status.Conditions, t)
	if c == nil || c.Status != metav1.ConditionTrue || meta.IsStatusConditionTrue(old.Status.Conditions, t) {
		return nil
	}
	return c
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
