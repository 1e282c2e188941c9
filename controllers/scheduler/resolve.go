package scheduler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// Unqueueable says why the engine refused a workload's spec: the API's
// validation makes that rare. Whether a workload may be queued at all
// (deactivated, LocalQueue missing or stopped, namespace not accepted) is
// the engine's decision, reported as a pending reason.
type Unqueueable struct {
	// Reason is a pending reason.
	Reason berthv1.WorkloadReason
	// Message says what to fix.
	Message string
}

// ResolveQueue resolves the API objects a workload is queued through into
// the plain facts the engine decides on: the ClusterQueue it is queued in
// (an admitted one, the ClusterQueue of its admission) with its
// LocalQueue's weight, whether its LocalQueue is missing or stopped, and
// whether the ClusterQueue accepts its namespace. Errors are reserved for
// failed reads.
func ResolveQueue(ctx context.Context, r client.Reader, wl *berthv1.Workload) (lifecycle.QueueRef, error) {
	admitted := wl.Status.Admission != nil
	if !admitted && !wl.IsActive() {
		return lifecycle.QueueRef{}, nil // held as deactivated whatever its queues
	}
	lq := &berthv1.LocalQueue{}
	err := r.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, lq)
	switch {
	case apierrors.IsNotFound(err):
		q := lifecycle.QueueRef{LocalQueueState: admission.LocalQueueMissing}
		if admitted {
			q.ClusterQueue = wl.Status.Admission.ClusterQueue
		}
		return q, nil
	case err != nil:
		return lifecycle.QueueRef{}, fmt.Errorf("reading LocalQueue %s/%s: %w", wl.Namespace, wl.Spec.QueueName, err)
	}
	q := lifecycle.QueueOf(lq)
	if admitted {
		// Admitted workloads keep running where they were admitted: only a
		// drain or a deactivation evicts them.
		return lifecycle.QueueRef{ClusterQueue: wl.Status.Admission.ClusterQueue, LocalQueueState: q.LocalQueueState}, nil
	}
	if q.LocalQueueState != admission.LocalQueueOpen {
		return q, nil
	}
	q.PriorityClassRefused = lifecycle.RefusedPriorityClass(lq, wl)
	refusal, err := checkClusterQueue(ctx, r, q.ClusterQueue, wl.Namespace)
	q.NamespaceRefusal = refusal
	return q, err
}

// checkClusterQueue says whether a ClusterQueue refuses workloads from a
// namespace. A missing ClusterQueue is no reason to refuse: the engine holds
// the workload and reports ClusterQueueNotFound until it is created.
func checkClusterQueue(ctx context.Context, r client.Reader, cqName, namespace string) (admission.NamespaceRefusal, error) {
	cq := &berthv1.ClusterQueue{}
	err := r.Get(ctx, client.ObjectKey{Name: cqName}, cq)
	if apierrors.IsNotFound(err) {
		return admission.NamespaceSelected, nil
	}
	if err != nil {
		return admission.NamespaceSelected, fmt.Errorf("reading ClusterQueue %s: %w", cqName, err)
	}
	ok, err := NamespaceAllowed(ctx, r, cq, namespace)
	switch {
	case err != nil || ok:
		return admission.NamespaceSelected, err
	case cq.Spec.NamespaceSelector == nil:
		return admission.NamespaceNoSelector, nil
	}
	return admission.NamespaceNotSelected, nil
}

// NotAllowedMessage says why a ClusterQueue refuses a namespace and who
// can change that: the engine's words for its NamespaceNotAllowed reason.
func NotAllowedMessage(cq *berthv1.ClusterQueue, namespace string) string {
	refusal := admission.NamespaceNotSelected
	if cq.Spec.NamespaceSelector == nil {
		refusal = admission.NamespaceNoSelector
	}
	return admission.NotAllowedMessage(refusal, cq.Name, namespace)
}

// NamespaceAllowed reports whether the ClusterQueue's namespaceSelector
// selects the namespace. An unset selector selects no namespace; {} selects
// every one.
func NamespaceAllowed(ctx context.Context, r client.Reader, cq *berthv1.ClusterQueue, namespace string) (bool, error) {
	if cq.Spec.NamespaceSelector == nil {
		// Unset selects no namespace: a ClusterQueue's quota is spent only
		// where its administrator says ({} for every namespace).
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(cq.Spec.NamespaceSelector)
	if err != nil {
		return false, fmt.Errorf("ClusterQueue %s has an invalid namespaceSelector: %w", cq.Name, err)
	}
	if sel.Empty() {
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return false, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}
