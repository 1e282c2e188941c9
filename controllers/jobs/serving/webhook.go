package serving

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// +kubebuilder:webhook:path=/mutate-apps-v1-deployment,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps,resources=deployments,verbs=create;update,versions=v1,name=mdeployment.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`
// +kubebuilder:webhook:path=/mutate-apps-v1-statefulset,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps,resources=statefulsets,verbs=create;update,versions=v1,name=mstatefulset.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]}}`
// +kubebuilder:webhook:path=/validate-apps-v1-deployment,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps,resources=deployments,verbs=create;update,versions=v1,name=vdeployment.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`
// +kubebuilder:webhook:path=/validate-apps-v1-statefulset,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps,resources=statefulsets,verbs=create;update,versions=v1,name=vstatefulset.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`

// DeploymentDefaulter gives the pod template of a queued Deployment its
// queue label, so the pods its ReplicaSets create are gated.
type DeploymentDefaulter struct{}

var _ admission.Defaulter[*appsv1.Deployment] = DeploymentDefaulter{}

// Default copies the Deployment's queue label into its pod template, and
// takes it out of the template when the Deployment lost it (the webhook is
// called when the old object carried the label): the pods follow the
// Deployment in and out of berth. Other labels are left alone.
func (DeploymentDefaulter) Default(_ context.Context, d *appsv1.Deployment) error {
	syncLabel(&d.Spec.Template, berthv1.QueueNameLabel, d.Labels[berthv1.QueueNameLabel], isQueued(d.Labels))
	return nil
}

// StatefulSetDefaulter gives the pod template of a queued StatefulSet its
// queue label and, when the set is one gang, the berth.dev/gang label.
type StatefulSetDefaulter struct{}

var _ admission.Defaulter[*appsv1.StatefulSet] = StatefulSetDefaulter{}

// Default copies the queue label and the gang annotation into the pod
// template, removing them from it when the StatefulSet dropped them.
func (StatefulSetDefaulter) Default(_ context.Context, s *appsv1.StatefulSet) error {
	syncLabel(&s.Spec.Template, berthv1.QueueNameLabel, s.Labels[berthv1.QueueNameLabel], isQueued(s.Labels))
	whole := s.Annotations[berthv1.GangAnnotation] == berthv1.GangSet
	syncLabel(&s.Spec.Template, berthv1.GangAnnotation, berthv1.GangSet, whole && isQueued(s.Labels))
	return nil
}

// isQueued reports whether labels name a queue.
func isQueued(labels map[string]string) bool {
	_, ok := labels[berthv1.QueueNameLabel]
	return ok
}

// syncLabel sets key to value on the template when want, and removes it
// otherwise.
func syncLabel(t *corev1.PodTemplateSpec, key, value string, want bool) {
	if !want {
		delete(t.Labels, key)
		return
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[key] = value
}

// DeploymentValidator refuses a Deployment whose queue label cannot name a
// LocalQueue. berth holds nothing at the Deployment level — each replica's
// pod is held by its gate, which the pod webhook guards — so the label may
// change: new pods go to the new queue, running replicas keep their
// admission.
type DeploymentValidator struct{}

var _ admission.Validator[*appsv1.Deployment] = DeploymentValidator{}

var deploymentKind = appsv1.SchemeGroupVersion.WithKind("Deployment").GroupKind()

// ValidateCreate checks the queue name.
func (DeploymentValidator) ValidateCreate(_ context.Context, d *appsv1.Deployment) (admission.Warnings, error) {
	return nil, jobs.Refusal(deploymentKind, d.Name, jobs.ValidateQueueName(d.Labels))
}

// ValidateUpdate checks the queue name.
func (DeploymentValidator) ValidateUpdate(_ context.Context, _, d *appsv1.Deployment) (admission.Warnings, error) {
	return nil, jobs.Refusal(deploymentKind, d.Name, jobs.ValidateQueueName(d.Labels))
}

// ValidateDelete allows every deletion.
func (DeploymentValidator) ValidateDelete(context.Context, *appsv1.Deployment) (admission.Warnings, error) {
	return nil, nil
}

// StatefulSetValidator refuses an invalid queue name and a gang annotation
// berth cannot honour.
type StatefulSetValidator struct{}

var _ admission.Validator[*appsv1.StatefulSet] = StatefulSetValidator{}

var statefulSetKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet").GroupKind()

// ValidateCreate checks the queue name and the gang annotation.
func (StatefulSetValidator) ValidateCreate(_ context.Context, s *appsv1.StatefulSet) (admission.Warnings, error) {
	return nil, jobs.Refusal(statefulSetKind, s.Name, validateStatefulSet(s))
}

// ValidateUpdate checks the queue name and the gang annotation.
func (StatefulSetValidator) ValidateUpdate(_ context.Context, _, s *appsv1.StatefulSet) (admission.Warnings, error) {
	return nil, jobs.Refusal(statefulSetKind, s.Name, validateStatefulSet(s))
}

// ValidateDelete allows every deletion.
func (StatefulSetValidator) ValidateDelete(context.Context, *appsv1.StatefulSet) (admission.Warnings, error) {
	return nil, nil
}

var gangPath = field.NewPath("metadata", "annotations").Key(berthv1.GangAnnotation)

// validateStatefulSet checks the queue name and berth.dev/gang: its only
// value is "set", and a whole-set gang needs podManagementPolicy Parallel.
// With OrderedReady the StatefulSet controller creates ordinal n+1 only
// once ordinal n is Ready, and a gated pod never is: the set would never
// have all its pods, and berth queues it only once they all exist.
func validateStatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	errs := jobs.ValidateQueueName(s.Labels)
	v, ok := s.Annotations[berthv1.GangAnnotation]
	switch {
	case !ok:
	case v != berthv1.GangSet:
		errs = append(errs, field.NotSupported(gangPath, v, []string{berthv1.GangSet}))
	case s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement:
		errs = append(errs, field.Invalid(gangPath, v, fmt.Sprintf(
			"a StatefulSet that is one gang needs spec.podManagementPolicy %s: with %s its pods are created one after "+
				"another once the previous one is Ready, and a gated pod never is; set it to %s (or remove the annotation for a gang per ordinal)",
			appsv1.ParallelPodManagement, appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	return errs
}
