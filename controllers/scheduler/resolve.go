package scheduler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// Unqueueable says why a workload cannot be queued at all: it is
// deactivated, its LocalQueue is missing or stopped, or its ClusterQueue
// does not accept the workload's namespace.
type Unqueueable struct {
	// Reason is a pending reason.
	Reason berthv1.WorkloadReason
	// Message says what to fix.
	Message string
}

// ResolveQueue finds the ClusterQueue a pending workload is queued in, and
// its LocalQueue's weight. An admitted workload is in the ClusterQueue of its
// admission. It returns a non-nil Unqueueable, not an error, when the
// workload's queue setup is wrong; errors are reserved for failed reads.
func ResolveQueue(ctx context.Context, r client.Reader, wl *berthv1.Workload) (lifecycle.QueueRef, *Unqueueable, error) {
	if wl.Status.Admission != nil {
		return lifecycle.QueueRef{ClusterQueue: wl.Status.Admission.ClusterQueue}, nil, nil
	}
	if !wl.IsActive() {
		return lifecycle.QueueRef{}, &Unqueueable{Reason: berthv1.ReasonDeactivated, Message: fmt.Sprintf(
			"the Workload is deactivated (spec.active is false); it waits until activated: kubectl berth activate workload %s -n %s",
			wl.Name, wl.Namespace)}, nil
	}
	lq := &berthv1.LocalQueue{}
	err := r.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, lq)
	if apierrors.IsNotFound(err) {
		return lifecycle.QueueRef{}, &Unqueueable{Reason: berthv1.ReasonLocalQueueNotFound, Message: fmt.Sprintf(
			"LocalQueue %q does not exist in namespace %q: create it, or set the %s label to an existing LocalQueue",
			wl.Spec.QueueName, wl.Namespace, berthv1.QueueNameLabel)}, nil
	}
	if err != nil {
		return lifecycle.QueueRef{}, nil, fmt.Errorf("reading LocalQueue %s/%s: %w", wl.Namespace, wl.Spec.QueueName, err)
	}
	if p := lq.Spec.StopPolicy; p == berthv1.StopPolicyHold || p == berthv1.StopPolicyHoldAndDrain {
		return lifecycle.QueueRef{}, &Unqueueable{Reason: berthv1.ReasonLocalQueueStopped, Message: fmt.Sprintf(
			"LocalQueue %q is stopped (stopPolicy %s); its workloads wait until it is resumed: kubectl berth resume localqueue %s -n %s",
			lq.Name, p, lq.Name, lq.Namespace)}, nil
	}
	q := lifecycle.QueueOf(lq)
	unq, err := checkClusterQueue(ctx, r, q.ClusterQueue, wl.Namespace)
	if err != nil || unq != nil {
		return lifecycle.QueueRef{}, unq, err
	}
	return q, nil, nil
}

// checkClusterQueue says whether a ClusterQueue accepts workloads from a
// namespace. A missing ClusterQueue is no reason to refuse: the engine holds
// the workload and reports ClusterQueueNotFound until it is created.
func checkClusterQueue(ctx context.Context, r client.Reader, cqName, namespace string) (*Unqueueable, error) {
	cq := &berthv1.ClusterQueue{}
	err := r.Get(ctx, client.ObjectKey{Name: cqName}, cq)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ClusterQueue %s: %w", cqName, err)
	}
	ok, err := NamespaceAllowed(ctx, r, cq, namespace)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &Unqueueable{Reason: berthv1.ReasonNamespaceNotAllowed, Message: NotAllowedMessage(cq, namespace)}, nil
	}
	return nil, nil
}

// NotAllowedMessage says why a ClusterQueue refuses a namespace and who
// can change that.
func NotAllowedMessage(cq *berthv1.ClusterQueue, namespace string) string {
	if cq.Spec.NamespaceSelector == nil {
		return fmt.Sprintf("ClusterQueue %q has no namespaceSelector, which selects no namespace: "+
			"its administrator sets one that matches namespace %q ({} for every namespace), or use another LocalQueue", cq.Name, namespace)
	}
	return fmt.Sprintf("ClusterQueue %q does not accept workloads from namespace %q: "+
		"its administrator changes its namespaceSelector, or use another LocalQueue", cq.Name, namespace)
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
