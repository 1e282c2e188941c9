package queue

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-berth-dev-v1alpha1-clusterqueue,mutating=false,failurePolicy=fail,sideEffects=None,groups=berth.dev,resources=clusterqueues,verbs=create;update,versions=v1alpha1,name=vclusterqueue.berth.dev,admissionReviewVersions=v1

// ClusterQueueValidator rejects ClusterQueues that break the rules the
// schema cannot express (see berthv1.ClusterQueue.Validate).
type ClusterQueueValidator struct{}

var _ admission.Validator[*berthv1.ClusterQueue] = ClusterQueueValidator{}

// ValidateCreate validates a new ClusterQueue.
func (ClusterQueueValidator) ValidateCreate(_ context.Context, cq *berthv1.ClusterQueue) (admission.Warnings, error) {
	return nil, invalid(cq)
}

// ValidateUpdate validates a changed ClusterQueue.
func (ClusterQueueValidator) ValidateUpdate(_ context.Context, _, cq *berthv1.ClusterQueue) (admission.Warnings, error) {
	return nil, invalid(cq)
}

// ValidateDelete allows every deletion: the queue's workloads are held.
func (ClusterQueueValidator) ValidateDelete(context.Context, *berthv1.ClusterQueue) (admission.Warnings, error) {
	return nil, nil
}

func invalid(cq *berthv1.ClusterQueue) error {
	if errs := cq.Validate(); len(errs) > 0 {
		return apierrors.NewInvalid(berthv1.GroupVersion.WithKind("ClusterQueue").GroupKind(), cq.Name, errs)
	}
	return nil
}

// +kubebuilder:webhook:path=/validate-berth-dev-v1alpha1-resourceflavor,mutating=false,failurePolicy=fail,sideEffects=None,groups=berth.dev,resources=resourceflavors,verbs=create;update,versions=v1alpha1,name=vresourceflavor.berth.dev,admissionReviewVersions=v1

// ResourceFlavorValidator rejects ResourceFlavors whose node labels,
// tolerations or topology levels pods could not carry (see
// berthv1.ResourceFlavor.Validate).
type ResourceFlavorValidator struct{}

var _ admission.Validator[*berthv1.ResourceFlavor] = ResourceFlavorValidator{}

// ValidateCreate validates a new ResourceFlavor.
func (ResourceFlavorValidator) ValidateCreate(_ context.Context, rf *berthv1.ResourceFlavor) (admission.Warnings, error) {
	return nil, invalidFlavor(rf)
}

// ValidateUpdate validates a changed ResourceFlavor.
func (ResourceFlavorValidator) ValidateUpdate(_ context.Context, _, rf *berthv1.ResourceFlavor) (admission.Warnings, error) {
	return nil, invalidFlavor(rf)
}

// ValidateDelete allows every deletion.
func (ResourceFlavorValidator) ValidateDelete(context.Context, *berthv1.ResourceFlavor) (admission.Warnings, error) {
	return nil, nil
}

func invalidFlavor(rf *berthv1.ResourceFlavor) error {
	if errs := rf.Validate(); len(errs) > 0 {
		return apierrors.NewInvalid(berthv1.GroupVersion.WithKind("ResourceFlavor").GroupKind(), rf.Name, errs)
	}
	return nil
}
