// Package provisioning carries out a gang's capacity bookings through
// cluster-autoscaler ProvisioningRequests. It builds, watches and reports;
// it decides nothing.
//
// The admission engine decides when a booking is needed, of which class, on
// which flavor and in which domain, and what every answer means — success,
// failure in that domain, eviction of a started gang, when to try again and
// when to give up (admission/booking.go); the scheduler writes those
// decisions through the lifecycle package. This package:
//
//   - creates the attempt's PodTemplates, then its ProvisioningRequest, both
//     owned by the Workload, and deletes the requests no booking needs;
//   - reports every answer of the autoscaler to the engine (lifecycle.AnswerOf), and
//     records on the Workload the first time it found no capacity;
//   - at a started gang's podsReadySeconds deadline, records that all its
//     pods were Ready, or reports that they were not;
//   - follows whether the cluster serves the API at all and reports it on
//     every flavor with a provisioning policy.
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
	"github.com/berth-dev/berth/controllers/flavors"
)

// apiextensionsCRD is the kind of CustomResourceDefinitions.
var apiextensionsCRD = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// Options configure the provisioning controllers.
type Options struct {
	// Clock is read for the pods-ready deadline and stamps the Workload
	// conditions; tests inject a fake one. Default: the real clock.
	Clock clock.PassiveClock
}

// Controllers are the provisioning controllers: the Workload reconciler,
// the API availability watch and the ResourceFlavor condition.
type Controllers struct {
	recorder events.EventRecorder
	reporter Reporter
	opts     Options
}

// New returns the provisioning controllers; recorder records events on
// Workloads, reporter takes the autoscaler's answers.
func New(recorder events.EventRecorder, reporter Reporter, opts Options) *Controllers {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controllers{recorder: recorder, reporter: reporter, opts: opts}
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
	wr := NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), c.recorder, c.opts.Clock, state, c.reporter)
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
	rfs, err := flavors.New(c).List(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ResourceFlavors")
	}
	for i := range rfs {
		if rfs[i].Spec.Provisioning != nil {
			out = append(out, &rfs[i])
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
