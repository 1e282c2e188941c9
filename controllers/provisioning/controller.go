// Package provisioning books a gang's capacity through cluster-autoscaler
// ProvisioningRequests and lets the gang start only on capacity that exists.
//
// The admission engine decides when a booking is needed and of which class
// and domain; the scheduler records it in one status write (quota
// reserved, Admitted=False/WaitingForCapacity, status.provisioning Pending
// with the attempt's request name). This package carries the decision out
// and reports the autoscaler's answer back on the Workload:
//
//   - it creates the attempt's PodTemplates and ProvisioningRequest, owned
//     by the Workload and named after it, and deletes earlier attempts';
//   - Provisioned: the Workload is admitted (its job adapter starts the job
//     with the consume-provisioning-request annotations);
//   - Failed, or BookingExpired before the pods used it: the quota is
//     released (or, if the job started, it is evicted first), the domain is
//     recorded as failed and the next attempt waits for a backoff, until
//     maxAttempts bookings failed;
//   - CapacityRevoked, or not every pod Ready within podsReadySeconds: the
//     job is evicted and queued again after a backoff;
//   - whether the cluster serves the API at all is followed at run time and
//     reported on every flavor with a provisioning policy.
//
// Decisions (Decide, Failure, Eviction, BuildRequest, Backoff) are pure
// functions; the reconcilers read the objects and write the result once.
package provisioning

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/metrics"
)

// apiextensionsCRD is the kind of CustomResourceDefinitions.
var apiextensionsCRD = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// Options configure the provisioning controllers.
type Options struct {
	// Clock is read for backoffs and the pods-ready deadline; tests inject
	// a fake one. Default: the real clock.
	Clock clock.PassiveClock
	// Metrics, when set, counts each request's outcome by class.
	Metrics *metrics.Metrics
}

// Controllers are the provisioning controllers: the Workload reconciler,
// the API availability watch and the ResourceFlavor condition.
type Controllers struct {
	recorder events.EventRecorder
	opts     Options
}

// New returns the provisioning controllers; recorder records events on
// Workloads.
func New(recorder events.EventRecorder, opts Options) *Controllers {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controllers{recorder: recorder, opts: opts}
}

// Name of the controllers, for logs.
func (c *Controllers) Name() string { return "provisioning" }

// Register adds the controllers to mgr. The ProvisioningRequest watch
// starts once the cluster serves the API, which may be after mgr started.
func (c *Controllers) Register(ctx context.Context, mgr ctrl.Manager) error {
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	state := &apiState{}
	wlEvents, rfEvents := make(chan event.GenericEvent, 64), make(chan event.GenericEvent, 64)
	state.changed = []chan event.GenericEvent{wlEvents, rfEvents}
	wr := &Reconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), recorder: c.recorder, clock: c.opts.Clock, state: state, metrics: c.opts.Metrics}
	wc, err := wr.build(mgr, wlEvents)
	if err != nil {
		return err
	}
	state.onAvailable = func() error {
		h := handler.TypedEnqueueRequestForOwner[*autoscalingv1.ProvisioningRequest](mgr.GetScheme(), mgr.GetRESTMapper(), &berthv1.Workload{}, handler.OnlyControllerOwner())
		if err := wc.Watch(source.Kind(mgr.GetCache(), &autoscalingv1.ProvisioningRequest{}, h)); err != nil {
			return fmt.Errorf("watching ProvisioningRequests: %w", err)
		}
		return nil
	}
	// The state at start-up; the CRD watch follows later changes.
	ok, err := served(disc)
	if err != nil {
		return err
	}
	if _, err := state.set(ok); err != nil {
		return err
	}
	if !ok {
		mgr.GetLogger().Info("the cluster does not serve ProvisioningRequests; capacity bookings wait until it does")
	}
	ar := &apiReconciler{client: mgr.GetClient(), discovery: disc, state: state, all: func(ctx context.Context) []client.Object {
		return affected(ctx, mgr.GetClient())
	}}
	if err := ar.register(mgr); err != nil {
		return fmt.Errorf("registering provisioning-api controller: %w", err)
	}
	fr := &flavorReconciler{client: mgr.GetClient(), state: state, events: rfEvents}
	if err := fr.register(mgr); err != nil {
		return fmt.Errorf("registering provisioning-flavor controller: %w", err)
	}
	return nil
}

// affected lists what an API change concerns: the flavors with a policy
// and the workloads that book capacity.
func affected(ctx context.Context, c client.Client) []client.Object {
	var out []client.Object
	rfs := &berthv1.ResourceFlavorList{}
	if err := c.List(ctx, rfs); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ResourceFlavors")
	}
	for i := range rfs.Items {
		if rfs.Items[i].Spec.Provisioning != nil {
			out = append(out, &rfs.Items[i])
		}
	}
	wls := &berthv1.WorkloadList{}
	if err := c.List(ctx, wls); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Workloads")
	}
	for i := range wls.Items {
		if p := wls.Items[i].Status.Provisioning; p != nil && p.State == berthv1.ProvisioningPending {
			out = append(out, &wls.Items[i])
		}
	}
	return out
}
