package headroom

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// PolicyLabel on the PodTemplates and CapacityBuffers berth keeps for a
// HeadroomPolicy names the policy.
const PolicyLabel = "berth.dev/headroom-policy"

// TemplateHashAnnotation on an object berth keeps holds the hash of the
// pod template berth last wrote into it. The API server defaults fields of
// a stored template, so comparing it with the one berth builds would find
// a change every time; comparing hashes of what berth built does not.
const TemplateHashAnnotation = "berth.dev/headroom-template-hash"

// templateHash is the hash of t as berth builds it.
func templateHash(t corev1.PodTemplateSpec) string {
	data, err := json.Marshal(t)
	if err != nil {
		return "" // a template always marshals; an empty hash only rewrites it
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// setTemplateHash records the hash of the template written into o, and
// says whether it differs from the one recorded: the template is to be
// written.
func setTemplateHash(o metav1.Object, hash string) bool {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	changed := hash == "" || a[TemplateHashAnnotation] != hash
	a[TemplateHashAnnotation] = hash
	o.SetAnnotations(a)
	return changed
}

// buffer is one CapacityBuffer berth keeps for a policy: count pods of one
// shape of the target's replica, pinned to one domain.
type buffer struct {
	name     string
	template corev1.PodTemplateSpec
	pods     int32
}

// desiredBuffers are the buffers that keep the policy's headroom: per
// domain with headroom and per pod shape of a replica, the shape's pods
// times the replicas kept there, each pod pinned to the domain's headroom
// nodes (their label, the domain's topology label, the taint's
// toleration).
func desiredBuffers(hp *berthv1.HeadroomPolicy, t target, clusterQueue string, domains []berthv1.HeadroomDomain) []buffer {
	var out []buffer
	for _, d := range domains {
		for _, s := range t.shapes {
			tpl := *s.template.DeepCopy()
			pinned := map[string]string{berthv1.HeadroomLabel: clusterQueue}
			if t.level != "" {
				pinned[t.level] = d.Name
			}
			if tpl.Spec.NodeSelector == nil {
				tpl.Spec.NodeSelector = map[string]string{}
			}
			maps.Copy(tpl.Spec.NodeSelector, pinned)
			if !tolerates(&tpl.Spec, clusterQueue) {
				taint := headroomTaint(clusterQueue)
				tpl.Spec.Tolerations = append(tpl.Spec.Tolerations, corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual,
					Value: taint.Value, Effect: taint.Effect})
			}
			// The buffer's pods are the autoscaler's, never queued by
			// berth: no queue label, no gate.
			delete(tpl.Labels, berthv1.QueueNameLabel)
			tpl.Spec.SchedulingGates = nil
			out = append(out, buffer{name: bufferName(hp.Name, s.role, d.Name), template: tpl, pods: d.Replicas * s.count})
		}
	}
	return out
}

// bufferName names a policy's buffer of one role in one domain: the
// domain is hashed, as topology values need not be valid names.
func bufferName(policy, role, domain string) string {
	sum := sha256.Sum256([]byte(domain))
	suffix := role + "-" + hex.EncodeToString(sum[:])[:8]
	if max := 253 - len(suffix) - len("headroom--"); len(policy) > max {
		policy = policy[:max]
	}
	return "headroom-" + policy + "-" + suffix
}

// applyBuffers makes the policy's PodTemplates and CapacityBuffers those
// of want: created or updated, and those no longer wanted deleted. Both
// are owned by the policy, so that deleting it deletes them.
func (r *Reconciler) applyBuffers(ctx context.Context, hp *berthv1.HeadroomPolicy, want []buffer) error {
	wanted := map[string]bool{}
	for _, b := range want {
		wanted[b.name] = true
		if err := r.applyTemplate(ctx, hp, b); err != nil {
			return err
		}
		if err := r.applyBuffer(ctx, hp, b); err != nil {
			return err
		}
	}
	var buffers cbv1beta1.CapacityBufferList
	if err := r.reader.List(ctx, &buffers, client.InNamespace(hp.Namespace), client.MatchingLabels{PolicyLabel: hp.Name}); err != nil {
		return fmt.Errorf("listing the CapacityBuffers of HeadroomPolicy %s/%s: %w", hp.Namespace, hp.Name, err)
	}
	for i := range buffers.Items {
		if b := &buffers.Items[i]; !wanted[b.Name] && metav1.IsControlledBy(b, hp) {
			if err := r.client.Delete(ctx, b); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting CapacityBuffer %s/%s: %w", b.Namespace, b.Name, err)
			}
		}
	}
	var templates corev1.PodTemplateList
	if err := r.reader.List(ctx, &templates, client.InNamespace(hp.Namespace), client.MatchingLabels{PolicyLabel: hp.Name}); err != nil {
		return fmt.Errorf("listing the PodTemplates of HeadroomPolicy %s/%s: %w", hp.Namespace, hp.Name, err)
	}
	for i := range templates.Items {
		if pt := &templates.Items[i]; !wanted[pt.Name] && metav1.IsControlledBy(pt, hp) {
			if err := r.client.Delete(ctx, pt); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting PodTemplate %s/%s: %w", pt.Namespace, pt.Name, err)
			}
		}
	}
	return nil
}

// applyTemplate creates or updates b's PodTemplate.
func (r *Reconciler) applyTemplate(ctx context.Context, hp *berthv1.HeadroomPolicy, b buffer) error {
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: hp.Namespace, Name: b.name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.client, pt, func() error {
		if pt.Labels == nil {
			pt.Labels = map[string]string{}
		}
		pt.Labels[PolicyLabel] = hp.Name
		if setTemplateHash(pt, templateHash(b.template)) {
			pt.Template = b.template
		}
		return controllerutil.SetControllerReference(hp, pt, r.client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("keeping PodTemplate %s/%s: %w", hp.Namespace, b.name, err)
	}
	return nil
}

// applyBuffer creates or updates b's CapacityBuffer.
func (r *Reconciler) applyBuffer(ctx context.Context, hp *berthv1.HeadroomPolicy, b buffer) error {
	cb := &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: hp.Namespace, Name: b.name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.client, cb, func() error {
		if cb.Labels == nil {
			cb.Labels = map[string]string{}
		}
		cb.Labels[PolicyLabel] = hp.Name
		cb.Spec.ProvisioningStrategy = ptr.To(cbv1beta1.ActiveCapacity)
		cb.Spec.PodTemplateRef = &cbv1beta1.LocalObjectRef{Name: b.name}
		cb.Spec.ScalableRef = nil
		cb.Spec.Replicas = ptr.To(b.pods)
		return controllerutil.SetControllerReference(hp, cb, r.client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("keeping CapacityBuffer %s/%s: %w", hp.Namespace, b.name, err)
	}
	return nil
}
