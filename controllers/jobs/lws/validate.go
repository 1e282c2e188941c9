package lws

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// +kubebuilder:webhook:path=/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset,mutating=false,failurePolicy=fail,sideEffects=None,groups=leaderworkerset.x-k8s.io,resources=leaderworkersets,verbs=create;update,versions=v1,name=vleaderworkerset.berth.dev,admissionReviewVersions=v1,patch=`{"objectSelector":{"matchExpressions":[{"key":"berth.dev/queue-name","operator":"Exists"}]},"matchConditions":[{"name":"not-berth","expression":"request.operation != 'UPDATE' || !authorizer.group('berth.dev').resource('workloads').subresource('status').namespace(request.namespace).check('update').allowed()"}]}`

// Validator refuses an invalid queue name, and moving a LeaderWorkerSet out
// of its queue while berth holds a Workload for one of its replicas. A
// LeaderWorkerSet has no suspend field: its pods are gated, and the pod
// webhook guards the gates.
type Validator struct {
	// Workloads reads the replicas' Workloads.
	Workloads jobs.Workloads
}

var _ admission.Validator[*lwsv1.LeaderWorkerSet] = Validator{}

// ValidateCreate checks the queue name.
func (Validator) ValidateCreate(_ context.Context, lws *lwsv1.LeaderWorkerSet) (admission.Warnings, error) {
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), lws.Name, jobs.ValidateQueueName(lws.Labels))
}

// ValidateUpdate checks the queue name and its changes.
func (v Validator) ValidateUpdate(ctx context.Context, old, lws *lwsv1.LeaderWorkerSet) (admission.Warnings, error) {
	errs := jobs.ValidateQueueName(lws.Labels)
	oldQ, hadQ := old.Labels[berthv1.QueueNameLabel]
	newQ, hasQ := lws.Labels[berthv1.QueueNameLabel]
	if hadQ && (!hasQ || oldQ != newQ) {
		wl, err := v.Workloads.Held(ctx, lws.Namespace, lws.UID)
		if err != nil {
			return nil, err
		}
		errs = append(errs, jobs.ValidateQueueNameUpdate(old.Labels, lws.Labels, wl)...)
	}
	return nil, jobs.Refusal(Kind{}.GVK().GroupKind(), lws.Name, errs)
}

// ValidateDelete allows every deletion.
func (Validator) ValidateDelete(context.Context, *lwsv1.LeaderWorkerSet) (admission.Warnings, error) {
	return nil, nil
}
