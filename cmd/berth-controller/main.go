// Command berth-controller runs berth: the admission loop, the queue and job
// controllers, and the webhook that holds new jobs until they are admitted.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/buildinfo"
	"github.com/berth-dev/berth/controllers/certs"
	"github.com/berth-dev/berth/controllers/headroom"
	"github.com/berth-dev/berth/controllers/leader"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/controllers/visibility"
)

func main() {
	zapOpts := zap.Options{}
	c, err := parseFlags(os.Args[1:], &zapOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if c.version {
		fmt.Println(buildinfo.Get().String("berth-controller"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	ctrl.Log.Info("starting", "version", buildinfo.Get().Version, "commit", buildinfo.Get().Commit)
	if err := run(ctrl.SetupSignalHandler(), c); err != nil {
		ctrl.Log.Error(err, "berth-controller failed")
		os.Exit(1)
	}
}

// setupOptions are berth's options from its flags.
func setupOptions(c config) setup.Options {
	return setup.Options{
		Engine:             engineOptions(c),
		StatusInterval:     c.statusInterval,
		StatusRate:         c.statusRate,
		ApplyWorkers:       c.applyWorkers,
		JobWorkers:         c.jobWorkers,
		PendingStatusDelay: c.pendingStatusDelay,
		LocalQueueMetrics:  c.localQueueMetrics,
		DeviceClasses:      c.deviceClasses,
		Notifications:      notifyOptions(c),
		PodGroups:          c.podGroups,
		NoReplicaRecords:   !c.replicaRecords,
		Headroom:           headroom.Options{Namespace: c.namespace, PlaceholderImage: c.placeholderImage, Mechanism: c.headroomMechanism},
	}
}

func run(ctx context.Context, c config) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("registering Kubernetes types: %w", err)
	}
	if err := berthv1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("registering berth types: %w", err)
	}
	if err := setup.AddToScheme(scheme); err != nil {
		return err
	}
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(c.qps), c.burst
	cacheOpts, err := setup.CacheOptions()
	if err != nil {
		return err
	}
	opts := ctrl.Options{
		Cache:                   cacheOpts,
		Scheme:                  scheme,
		Metrics:                 metricsOptions(c),
		HealthProbeBindAddress:  c.probeAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        leaseName,
		LeaderElectionNamespace: c.namespace,
		LeaseDuration:           ptr.To(c.leaseDuration),
		RenewDeadline:           ptr.To(c.renewDue),
		// A replica that stops (a rollout, SIGTERM) hands its lease over
		// at once instead of making the next leader wait out the lease;
		// main exits right after the manager returns, as this requires.
		// A replica that loses its lease stops: the manager returns.
		LeaderElectionReleaseOnCancel: true,
		// Within the pod's default 30 s termination grace period.
		GracefulShutdownTimeout: ptr.To(gracefulShutdown),
	}
	if c.leaderElect {
		if err := fenceToLease(cfg, c, &opts); err != nil {
			return err
		}
	}
	if c.webhookPort > 0 {
		// Created now, started only when the first webhook is registered:
		// after the certificate is in place.
		opts.WebhookServer = webhook.NewServer(webhook.Options{Port: c.webhookPort, CertDir: c.certs.CertDir,
			TLSOpts: []func(*tls.Config){setup.HTTP1Only}})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := ctrlmetrics.Registry.Register(buildinfo.Get().Collector()); err != nil {
		return fmt.Errorf("registering berth_build_info: %w", err)
	}
	berth, err := setup.Setup(ctx, mgr, setupOptions(c))
	if err != nil {
		return err
	}
	var certsReady <-chan struct{}
	if c.servesTLS() {
		if certsReady, err = certs.Manage(mgr, c.certs); err != nil {
			return err
		}
	}
	ready, err := addWebhooks(mgr, c, certsReady)
	if err != nil {
		return err
	}
	if err := addVisibility(mgr, c, certsReady, berth.Scheduler); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	return startManager(ctx, mgr)
}

// leaseName is the leader-election Lease in berth's namespace.
const leaseName = "berth-controller.berth.dev"

// fenceToLease makes the manager elect its leader with a lease that
// records its renewals, and fences the manager's writes to it: a leader
// that was paused past its renew deadline writes nothing before it learns
// that it lost the lease and stops (see controllers/leader). The lease's
// own client is built from cfg before the fence wraps it.
func fenceToLease(cfg *rest.Config, c config, opts *ctrl.Options) error {
	lease, err := leader.NewLease(cfg, c.namespace, leaseName, c.renewDue)
	if err != nil {
		return err
	}
	ctrl.Log.Info("leader election", "identity", lease.Identity(), "lease", lease.Describe())
	opts.LeaderElectionResourceLockInterface = lease
	// Fenced in the transport, after the client-side rate limiter: every
	// client built from cfg is fenced, and a write held back by the rate
	// limiter is checked when it leaves, not when it was asked for.
	cfg.Wrap(leader.FenceTransport(lease.Fence))
	return nil
}

// gracefulShutdown is how long a stopping berth lets its controllers finish.
const gracefulShutdown = 20 * time.Second

// startManager runs mgr until ctx ends, and returns at most a grace
// period later. controller-runtime's manager does not return when it is
// stopped while a cache never synced — a missing RBAC rule does that — and
// spins instead (kubernetes-sigs/controller-runtime#3440). berth then
// exits at once with an error that says where to look: nothing ran that
// could need the grace period.
func startManager(ctx context.Context, mgr ctrl.Manager) error {
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var synced atomic.Bool
	go func() { synced.Store(mgr.GetCache().WaitForCacheSync(ctx)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	grace := gracefulShutdown + 5*time.Second
	if !synced.Load() {
		grace = time.Second
	}
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		return errors.New("stopped before its caches synced; the log says which list or watch failed (a missing RBAC rule?)")
	}
}

// metricsOptions serve /metrics over HTTPS behind the API server's
// authentication and authorization (a TokenReview and a SubjectAccessReview
// per scrape, cached by controller-runtime), or plain for local runs. The
// serving certificate is self-signed: scrapers verify the caller, not the
// other way round, as in every kubebuilder project.
func metricsOptions(c config) metricsserver.Options {
	o := metricsserver.Options{BindAddress: c.metricsAddr, SecureServing: c.metricsSecure}
	if c.metricsSecure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// addWebhooks registers the webhooks once their certificate is in place
// and returns the readiness check: not ready until the webhook server
// serves, so no Service routes a webhook call to a replica that would fail
// it.
func addWebhooks(mgr ctrl.Manager, c config, certsReady <-chan struct{}) (healthz.Checker, error) {
	if c.webhookPort <= 0 {
		return healthz.Ping, nil
	}
	var started atomic.Pointer[healthz.Checker]
	err := mgr.Add(&afterCerts{certsReady: certsReady, run: func(context.Context) error {
		// Every kind's webhooks, as Setup runs every part.
		if err := setup.RegisterWebhooks(mgr, nil, c.podGroups, c.deviceClasses); err != nil {
			return err
		}
		check := mgr.GetWebhookServer().StartedChecker()
		started.Store(&check)
		return nil
	}})
	if err != nil {
		return nil, fmt.Errorf("adding webhook starter: %w", err)
	}
	return func(req *http.Request) error {
		check := started.Load()
		if check == nil {
			return errors.New("waiting for the webhook certificate")
		}
		return (*check)(req)
	}, nil
}

// addVisibility serves the visibility API once the certificate is in
// place. Callers are authenticated and authorized by the API server that
// $KUBECONFIG names, as the manager's client is (in a pod: the in-cluster
// configuration).
func addVisibility(mgr ctrl.Manager, c config, certsReady <-chan struct{}, engine visibility.Engine) error {
	if c.visibilityPort <= 0 {
		return nil
	}
	err := mgr.Add(&afterCerts{certsReady: certsReady, run: func(ctx context.Context) error {
		srv, err := visibility.New(visibility.Options{Port: c.visibilityPort, CertDir: c.certs.CertDir,
			Kubeconfig: os.Getenv("KUBECONFIG")}, engine, mgr.GetClient())
		if err != nil {
			return err
		}
		return srv.Start(ctx)
	}})
	if err != nil {
		return fmt.Errorf("adding the visibility server: %w", err)
	}
	return nil
}
