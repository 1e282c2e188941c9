// Package workloadstatus writes Workload status: conditions and admission.
// Several controllers write to the same status (the scheduler admits and
// evicts, job adapters report finish and requeue), so every write is a
// merge patch guarded by the object's resourceVersion and retried on a fresh
// read when another writer got there first. A mutation that changes nothing
// writes nothing.
package workloadstatus

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Mutation changes a workload's status in place. It may inspect the whole
// object and returns false when the status must not be changed (for example
// because the workload moved on since the decision was taken).
type Mutation func(wl *berthv1.Workload) bool

// Patch applies mutate to wl and writes the status if it changed. On a
// conflict it re-reads the workload with reader (pass an uncached reader so
// the retry sees the latest version) and tries again. It returns whether a
// write happened; wl holds the written object afterwards.
func Patch(ctx context.Context, c client.Client, reader client.Reader, wl *berthv1.Workload, mutate Mutation) (bool, error) {
	written := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		base := wl.DeepCopy()
		if !mutate(wl) || equality.Semantic.DeepEqual(base.Status, wl.Status) {
			return nil
		}
		err := c.Status().Patch(ctx, wl, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			fresh := &berthv1.Workload{}
			if gerr := reader.Get(ctx, client.ObjectKeyFromObject(wl), fresh); gerr != nil {
				return fmt.Errorf("re-reading workload after conflict: %w", gerr)
			}
			*wl = *fresh
			return err
		}
		if err != nil {
			return err
		}
		written = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("patching status of workload %s/%s: %w", wl.Namespace, wl.Name, err)
	}
	return written, nil
}

// SetCondition sets a condition on the workload, keeping the transition time
// when the status does not change, and reports whether anything changed.
func SetCondition(wl *berthv1.Workload, condType string, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: wl.Generation,
	})
}

// IsTrue reports whether the workload has the condition with status True.
func IsTrue(wl *berthv1.Workload, condType string) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, condType)
}

// IsFinished reports whether the workload's job has ended.
func IsFinished(wl *berthv1.Workload) bool { return IsTrue(wl, berthv1.ConditionFinished) }

// IsAdmitted reports whether the workload holds quota and may run: it has an
// admission, and is neither finished nor being evicted.
func IsAdmitted(wl *berthv1.Workload) bool {
	return wl.Status.Admission != nil && IsTrue(wl, berthv1.ConditionAdmitted) &&
		!IsTrue(wl, berthv1.ConditionEvicted) && !IsFinished(wl)
}

// IsEvicting reports whether berth is taking the workload's quota back: it
// still holds its admission while its job is being stopped.
func IsEvicting(wl *berthv1.Workload) bool {
	return wl.Status.Admission != nil && IsTrue(wl, berthv1.ConditionEvicted) && !IsFinished(wl)
}

// Admit records an admission: it sets the admission and the QuotaReserved
// and Admitted conditions, and clears a past eviction.
func Admit(wl *berthv1.Workload, a *berthv1.Admission, message string) {
	wl.Status.Admission = a
	// Admitted on existing capacity: an earlier booking's state no longer
	// describes the gang (its pods must not consume that request, and its
	// failures no longer count).
	wl.Status.Provisioning = nil
	SetCondition(wl, berthv1.ConditionQuotaReserved, metav1.ConditionTrue, berthv1.ReasonQuotaReserved, message)
	SetCondition(wl, berthv1.ConditionAdmitted, metav1.ConditionTrue, berthv1.ReasonAdmitted, message)
	if meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionEvicted) != nil {
		SetCondition(wl, berthv1.ConditionEvicted, metav1.ConditionFalse, berthv1.ReasonAdmitted, "admitted again after eviction")
	}
}

// ReserveForBooking records an admission whose capacity must be booked
// first: quota is reserved, the gang may not start yet, and the next
// booking attempt (numbered after the previous one, keeping the domains
// that failed) is pending.
func ReserveForBooking(wl *berthv1.Workload, a *berthv1.Admission, message string) {
	wl.Status.Admission = a
	prev := wl.Status.Provisioning
	next := &berthv1.ProvisioningStatus{Attempt: 1, State: berthv1.ProvisioningPending, Topology: a.Topology.DeepCopy()}
	if prev != nil && !prev.GaveUp {
		next.Attempt = prev.Attempt + 1
		next.FailedDomains = prev.FailedDomains
	}
	next.RequestName = fmt.Sprintf("%s-%d", wl.Name, next.Attempt)
	if a.Provisioning != nil {
		next.ClassName = a.Provisioning.ClassName
	}
	next.Message = fmt.Sprintf("booking capacity with ProvisioningRequest %s (%s)", next.RequestName, next.ClassName)
	if a.Topology == nil {
		next.Message += "; unpinned: the request names no topology domain (the gang requires none, or its flavor has no CapacityPool), so the autoscaler chooses where the nodes go"
	}
	wl.Status.Provisioning = next
	SetCondition(wl, berthv1.ConditionQuotaReserved, metav1.ConditionTrue, berthv1.ReasonQuotaReserved, message)
	SetCondition(wl, berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonWaitingForCapacity, next.Message)
	if meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionEvicted) != nil {
		SetCondition(wl, berthv1.ConditionEvicted, metav1.ConditionFalse, berthv1.ReasonWaitingForCapacity, "admitted again after eviction, waiting for capacity")
	}
}

// Requeue releases the quota of an evicted workload whose pods are gone, so
// it waits for admission again.
func Requeue(wl *berthv1.Workload, message string) {
	wl.Status.Admission = nil
	SetCondition(wl, berthv1.ConditionQuotaReserved, metav1.ConditionFalse, berthv1.ReasonPending, message)
	SetCondition(wl, berthv1.ConditionAdmitted, metav1.ConditionFalse, berthv1.ReasonRequeued, message)
	SetCondition(wl, berthv1.ConditionEvicted, metav1.ConditionTrue, berthv1.ReasonRequeued, message)
}
