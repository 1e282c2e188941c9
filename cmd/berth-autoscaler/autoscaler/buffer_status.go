package autoscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
)

// ensureManaged creates or updates the PodTemplate the controller keeps
// for a scalableRef buffer, a copy of the object's pod template owned by
// the buffer (controller reference), as cluster-autoscaler keeps
// capacitybuffer-<buffer>-pod-template; the injection reads it.
func (r *BufferReconciler) ensureManaged(ctx context.Context, b *cbv1beta1.CapacityBuffer, tmpl *corev1.PodTemplateSpec) (*corev1.PodTemplate, error) {
	name := types.NamespacedName{Namespace: b.Namespace, Name: ManagedTemplateName(b.Name)}
	t := &corev1.PodTemplate{}
	err := r.Client.Get(ctx, name, t)
	if apierrors.IsNotFound(err) {
		t = &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}, Template: *tmpl.DeepCopy()}
		t.OwnerReferences = []metav1.OwnerReference{ownerOf(b)}
		if err := r.Client.Create(ctx, t); err != nil {
			return nil, fmt.Errorf("creating PodTemplate %s for CapacityBuffer %s: %w", name, b.Name, err)
		}
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading PodTemplate %s: %w", name, err)
	}
	if c := metav1.GetControllerOf(t); c == nil || c.UID != b.UID {
		return nil, fix("PodTemplate %s exists and is not this buffer's: delete or rename it", name)
	}
	if equality.Semantic.DeepEqual(t.Template, *tmpl) {
		return t, nil
	}
	t.Template = *tmpl.DeepCopy()
	if err := r.Client.Update(ctx, t); err != nil {
		return nil, fmt.Errorf("updating PodTemplate %s for CapacityBuffer %s: %w", name, b.Name, err)
	}
	return t, nil
}

// ownerOf is the controller reference of a managed template to its
// buffer. It does not block the buffer's deletion, which would need
// permission on capacitybuffers/finalizers where the
// OwnerReferencesPermissionEnforcement admission plugin runs.
func ownerOf(b *cbv1beta1.CapacityBuffer) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: cbv1beta1.GroupVersion.String(), Kind: "CapacityBuffer",
		Name: b.Name, UID: b.UID, Controller: ptrTo(true),
	}
}

// writeStatus writes what the controller found for b through the status
// subresource, when it changed: the template, replica count (after
// quotas), template generation and strategy with ReadyForProvisioning=True
// and LimitedByQuotas, or ReadyForProvisioning=False (reason error) and
// no template or count. The pod injection's Provisioning condition is kept.
func (r *BufferReconciler) writeStatus(ctx context.Context, b *cbv1beta1.CapacityBuffer, res resolved, quota *QuotaResult) error {
	before := b.Status.DeepCopy()
	st := &b.Status
	now := r.Clock.Now()
	strategy := cbv1beta1.ActiveCapacity
	st.ProvisioningStrategy = &strategy
	if res.err != nil {
		st.PodTemplateRef, st.Replicas, st.PodTemplateGeneration = nil, nil, nil
		setBufferCondition(b, cbv1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, cbv1beta1.ReasonError, res.err.Error(), now)
		apimeta.RemoveStatusCondition(&st.Conditions, cbv1beta1.ConditionLimitedByQuotas)
	} else {
		replicas := res.replicas
		st.PodTemplateRef = &cbv1beta1.LocalObjectRef{Name: res.template.Name}
		st.PodTemplateGeneration = ptrTo(res.template.Generation)
		setBufferCondition(b, cbv1beta1.ConditionReadyForProvisioning, metav1.ConditionTrue, cbv1beta1.ReasonAttributesSetSuccessfully, "ready", now)
		switch {
		case quota == nil:
			apimeta.RemoveStatusCondition(&st.Conditions, cbv1beta1.ConditionLimitedByQuotas)
		case quota.Limited:
			replicas = quota.Replicas
			setBufferCondition(b, cbv1beta1.ConditionLimitedByQuotas, metav1.ConditionTrue, cbv1beta1.ReasonResourceQuotasAllocated, quota.Message(res.replicas), now)
		default:
			setBufferCondition(b, cbv1beta1.ConditionLimitedByQuotas, metav1.ConditionFalse, cbv1beta1.ReasonResourceQuotasAllocated, "", now)
		}
		st.Replicas = &replicas
	}
	if equality.Semantic.DeepEqual(*before, *st) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, b); err != nil {
		return fmt.Errorf("writing the status of CapacityBuffer %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

// setBufferCondition sets a condition of b; the transition time moves
// only when the status does, so an unchanged status is not written again.
// It reports whether the condition changed.
func setBufferCondition(b *cbv1beta1.CapacityBuffer, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) bool {
	old := apimeta.FindStatusCondition(b.Status.Conditions, typ)
	if old != nil && old.Status == status && old.Reason == reason && old.Message == msg && old.ObservedGeneration == b.Generation {
		return false
	}
	apimeta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(now),
	})
	return true
}

// PendingNode is a node a buffer's scale-up decided and the autoscaler
// has not created yet: one entry of BufferPendingAnnotation.
type PendingNode struct {
	// Pool and Node name the CapacityPool and the new node.
	Pool string `json:"pool"`
	Node string `json:"node"`
	// Due is when the node joins: the decision plus the pool's
	// provisioning latency.
	Due metav1.Time `json:"due"`
}

// bufferName names buffer b in errors.
func bufferName(b *cbv1beta1.CapacityBuffer) string {
	return "CapacityBuffer " + b.Namespace + "/" + b.Name
}

// PendingOf decodes b's BufferPendingAnnotation; a value that does not
// decode counts as none (the next loop scales up again if need be).
func PendingOf(b *cbv1beta1.CapacityBuffer) []PendingNode {
	return decodePending(b.Annotations[BufferPendingAnnotation])
}

// decodePending decodes a pending-nodes annotation, on a CapacityBuffer
// or a CapacityPool; a value that does not decode counts as none.
func decodePending(s string) []PendingNode {
	if s == "" {
		return nil
	}
	var out []PendingNode
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil
	}
	return out
}

// setPending records nodes in obj's BufferPendingAnnotation (removed when
// there are none) and patches obj's metadata: a CapacityBuffer's for its
// scale-ups, a CapacityPool's for the unschedulable pods' ones. what
// names obj in errors.
func setPending(ctx context.Context, c client.Client, obj client.Object, what string, nodes []PendingNode) error {
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("recording the pending nodes of %s: not a client.Object", what)
	}
	annotations := obj.GetAnnotations()
	if len(nodes) == 0 {
		delete(annotations, BufferPendingAnnotation)
	} else {
		data, err := json.Marshal(nodes)
		if err != nil {
			return fmt.Errorf("encoding the pending nodes of %s: %w", what, err)
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[BufferPendingAnnotation] = string(data)
	}
	obj.SetAnnotations(annotations)
	if equality.Semantic.DeepEqual(before.GetAnnotations(), obj.GetAnnotations()) {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("recording the pending nodes of %s: %w", what, err)
	}
	return nil
}

// pendingBufferNodes lists, from the API server, the nodes every buffer's
// scale-up still has to create.
func (r *RequestReconciler) pendingBufferNodes(ctx context.Context) ([]NewNode, error) {
	list := &cbv1beta1.CapacityBufferList{}
	if err := r.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing CapacityBuffers: %w", err)
	}
	var out []NewNode
	for i := range list.Items {
		for _, p := range PendingOf(&list.Items[i]) {
			out = append(out, NewNode{Pool: p.Pool, Name: p.Node})
		}
	}
	return out, nil
}
