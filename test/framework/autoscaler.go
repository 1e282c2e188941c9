package framework

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
)

// StartAutoscaler runs the stand-in autoscaler in-process against the
// plane, on a manager of its own, until the returned stop is called. The
// Env must know the ProvisioningRequest types (StartWithProvisioning).
func (e *Env) StartAutoscaler(ctx context.Context, o autoscaler.Options) (stop func() error, err error) {
	mgr, err := ctrl.NewManager(e.Plane.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// A suite may stop and start the autoscaler again in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the autoscaler's manager: %w", err)
	}
	if err := autoscaler.Setup(mgr, o); err != nil {
		return nil, fmt.Errorf("setting up the autoscaler: %w", err)
	}
	mgrCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.Join(errors.New("the autoscaler's cache did not sync"), <-done)
	}
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			return errors.New("the autoscaler did not stop within a minute")
		}
	}, nil
}
