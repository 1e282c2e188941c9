// Command berth-controller runs berth: the admission loop, the queue and job
// controllers, and the webhook that holds new jobs until they are admitted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/certs"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/setup"
)

// config is every command-line knob; docs/operating.md describes each.
type config struct {
	metricsAddr, probeAddr        string
	leaderElect                   bool
	namespace                     string
	webhookPort                   int
	certDir, certManagement       string
	webhookService, webhookSecret string
	qps                           float64
	burst                         int
	statusInterval                time.Duration
	applyWorkers                  int
	pendingStatusDelay            time.Duration
	fairSharing                   bool
	localQueueFairSharing         bool
	deviceClasses                 jobs.DeviceClassMapping
}

func parseFlags(args []string, zapOpts *zap.Options) (config, error) {
	var c config
	fs := flag.NewFlagSet("berth-controller", flag.ContinueOnError)
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "elect a leader so only one replica admits; turn off only for a single local replica")
	fs.StringVar(&c.namespace, "namespace", envOr("POD_NAMESPACE", "berth-system"), "namespace berth runs in (leader-election lease, certificate secret)")
	fs.IntVar(&c.webhookPort, "webhook-port", 9443, "port of the webhook server; 0 disables the webhooks")
	fs.StringVar(&c.certDir, "webhook-cert-dir", "/tmp/berth-webhook-certs", "directory of the webhook server's tls.crt and tls.key")
	fs.StringVar(&c.certManagement, "webhook-cert-management", "self", "self: berth creates, renews and injects its webhook certificate; external: another tool (e.g. cert-manager) does")
	fs.StringVar(&c.webhookService, "webhook-service", "berth-webhook-service", "name of the webhook Service the certificate is issued for")
	fs.StringVar(&c.webhookSecret, "webhook-secret", "berth-webhook-certs", "name of the Secret that holds the self-managed certificate")
	fs.Float64Var(&c.qps, "kube-api-qps", 500, "client-side limit of API requests per second (see docs/performance.md)")
	fs.IntVar(&c.burst, "kube-api-burst", 1000, "client-side burst of API requests")
	fs.DurationVar(&c.statusInterval, "queue-status-interval", 5*time.Second, "the most often a queue's counts and usage are written")
	fs.IntVar(&c.applyWorkers, "apply-workers", 16, "how many admission decisions are written to the API server at once")
	fs.DurationVar(&c.pendingStatusDelay, "pending-status-delay", time.Minute, "how long a workload waits its turn for quota before that is written to its status; reasons that need action are written at once")
	fs.BoolVar(&c.fairSharing, "fair-sharing", true, "order ClusterQueues in a cohort by dominant resource share")
	fs.BoolVar(&c.localQueueFairSharing, "local-queue-fair-sharing", false,
		"share each ClusterQueue between its LocalQueues by their weights instead of serving equal priorities by creation time")
	var draMapping string
	fs.StringVar(&draMapping, "dra-device-class", "", "DRA devices counted against quota: class=resource[:amount per device],... e.g. gpu.nvidia.com=nvidia.com/gpu")
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.deviceClasses, err = jobs.ParseDeviceClassMapping(draMapping); err != nil {
		return c, fmt.Errorf("--dra-device-class: %w", err)
	}
	if c.certManagement != "self" && c.certManagement != "external" {
		return c, fmt.Errorf("--webhook-cert-management must be self or external, not %q", c.certManagement)
	}
	if c.qps <= 0 || c.burst <= 0 {
		return c, errors.New("--kube-api-qps and --kube-api-burst must be positive")
	}
	return c, nil
}

// engineOptions are the admission engine's defaults with the flags applied.
func engineOptions(c config) admission.Options {
	o := admission.DefaultOptions()
	o.FairSharing = c.fairSharing
	o.LocalQueueFairSharing = c.localQueueFairSharing
	return o
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

func main() {
	zapOpts := zap.Options{}
	c, err := parseFlags(os.Args[1:], &zapOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := run(ctrl.SetupSignalHandler(), c); err != nil {
		ctrl.Log.Error(err, "berth-controller failed")
		os.Exit(1)
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
	if c.webhookPort > 0 && c.certManagement == "self" {
		direct, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("creating client: %w", err)
		}
		if err := certs.Ensure(ctx, direct, certs.Options{
			Namespace: c.namespace, SecretName: c.webhookSecret, ServiceName: c.webhookService, CertDir: c.certDir,
			MutatingWebhookConfigurations:   []string{"berth-mutating-webhook-configuration"},
			ValidatingWebhookConfigurations: []string{"berth-validating-webhook-configuration"},
		}); err != nil {
			return fmt.Errorf("managing webhook certificate: %w", err)
		}
	}
	cacheOpts, err := setup.CacheOptions()
	if err != nil {
		return err
	}
	opts := ctrl.Options{
		Cache:                   cacheOpts,
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: c.metricsAddr},
		HealthProbeBindAddress:  c.probeAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        "berth-controller.berth.dev",
		LeaderElectionNamespace: c.namespace,
	}
	if c.webhookPort > 0 {
		opts.WebhookServer = webhook.NewServer(webhook.Options{Port: c.webhookPort, CertDir: c.certDir})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if _, err := setup.Setup(ctx, mgr, setup.Options{
		Engine:             engineOptions(c),
		StatusInterval:     c.statusInterval,
		Webhooks:           c.webhookPort > 0,
		ApplyWorkers:       c.applyWorkers,
		PendingStatusDelay: c.pendingStatusDelay,
		DeviceClasses:      c.deviceClasses,
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	ready := healthz.Ping
	if c.webhookPort > 0 {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	return mgr.Start(ctx)
}
