package headroom

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// Where cluster-autoscaler serves no CapacityBuffer, headroom is kept the
// way clusters kept it before buffers (cluster-autoscaler's FAQ, "How can
// I configure overprovisioning"): placeholder pods that request a
// replica's resources at a priority below every workload's, pinned like
// the buffer's pods. A replica that needs their room preempts them
// (kube-scheduler), the placeholders go pending and the autoscaler scales
// up for them: the headroom is restored. They run in berth's namespace,
// so that berth's right to create Deployments stops at its own namespace.

// Labels on the placeholder Deployments and their pods.
const (
	// PlaceholderLabel names a placeholder Deployment on its pods.
	PlaceholderLabel = berthv1.HeadroomPlaceholderLabel
	// PolicyNamespaceLabel is the namespace of the policy a placeholder
	// Deployment keeps headroom for (PolicyLabel its name).
	PolicyNamespaceLabel = "berth.dev/headroom-namespace"
)

// Finalizer keeps a HeadroomPolicy until its placeholders, which live in
// another namespace and so cannot be owned by it, are deleted.
const Finalizer = "berth.dev/headroom"

// HeadroomByPlaceholder is the mechanism of placeholder pods.
const HeadroomByPlaceholder = "Placeholder"

// placeholderName names the placeholder Deployment of one buffer of a
// policy in namespace: a hash, since the three names together exceed a
// label value's 63 characters.
func placeholderName(namespace, buffer string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + buffer))
	return "headroom-" + hex.EncodeToString(sum[:])[:16]
}

// placeholderPod is a pod that requests what a pod of b's template
// requests and runs nothing, pinned and tolerating as b's pods do.
func (r *Reconciler) placeholderPod(b buffer, name string) corev1.PodTemplateSpec {
	reqs := jobs.PodRequests(&b.template.Spec)
	limits := corev1.ResourceList{}
	for res, q := range reqs {
		if res != corev1.ResourceCPU && res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage {
			limits[res] = q // extended resources need limits equal to requests
		}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{PlaceholderLabel: name}},
		Spec: corev1.PodSpec{
			PriorityClassName:             r.opts.PriorityClass,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			NodeSelector:                  b.template.Spec.NodeSelector,
			Affinity:                      b.template.Spec.Affinity,
			Tolerations:                   b.template.Spec.Tolerations,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65535),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "placeholder", Image: r.opts.PlaceholderImage,
				Resources: corev1.ResourceRequirements{Requests: reqs, Limits: limits},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
}

// applyPlaceholders makes the policy's placeholder Deployments those of
// want, and deletes those no longer wanted.
func (r *Reconciler) applyPlaceholders(ctx context.Context, hp *berthv1.HeadroomPolicy, want []buffer) error {
	wanted := map[string]bool{}
	for _, b := range want {
		name := placeholderName(hp.Namespace, b.name)
		wanted[name] = true
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: name}}
		_, err := controllerutil.CreateOrUpdate(ctx, r.client, d, func() error {
			d.Labels = map[string]string{PolicyLabel: hp.Name, PolicyNamespaceLabel: hp.Namespace}
			d.Spec.Replicas = ptr.To(b.pods)
			if d.Spec.Selector == nil { // immutable once created
				d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{PlaceholderLabel: name}}
			}
			pod := r.placeholderPod(b, name)
			if setTemplateHash(d, templateHash(pod)) {
				d.Spec.Template = pod
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("keeping placeholder Deployment %s/%s: %w", r.opts.Namespace, name, err)
		}
	}
	return r.deletePlaceholders(ctx, hp, wanted)
}

// deletePlaceholders deletes the policy's placeholder Deployments but the
// wanted ones.
func (r *Reconciler) deletePlaceholders(ctx context.Context, hp *berthv1.HeadroomPolicy, wanted map[string]bool) error {
	var list appsv1.DeploymentList
	if err := r.reader.List(ctx, &list, client.InNamespace(r.opts.Namespace),
		client.MatchingLabels{PolicyLabel: hp.Name, PolicyNamespaceLabel: hp.Namespace}); err != nil {
		return fmt.Errorf("listing the placeholders of HeadroomPolicy %s/%s: %w", hp.Namespace, hp.Name, err)
	}
	for i := range list.Items {
		if d := &list.Items[i]; !wanted[d.Name] {
			if err := r.client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting placeholder Deployment %s/%s: %w", d.Namespace, d.Name, err)
			}
		}
	}
	return nil
}
