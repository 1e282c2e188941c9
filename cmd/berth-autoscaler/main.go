// Command berth-autoscaler is a stand-in for cluster-autoscaler's
// ProvisioningRequest support over berth's CapacityPools and kwok fake
// nodes, for local demos, the e2e suite and kwok or kind clusters. See
// docs/autoscaler.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/cmd/internal/buildinfo"
)

// config is every command-line knob; docs/autoscaler.md describes each.
type config struct {
	metricsAddr, probeAddr string
	leaderElect            bool
	namespace              string
	kubeconfig             string
	version                bool
	opts                   autoscaler.Options
}

func parseFlags(args []string, zapOpts *zap.Options) (config, error) {
	c := config{opts: autoscaler.DefaultOptions()}
	fs := flag.NewFlagSet("berth-autoscaler", flag.ContinueOnError)
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.BoolVar(&c.leaderElect, "leader-elect", false, "elect a leader, for more than one replica")
	fs.StringVar(&c.namespace, "namespace", envOr("POD_NAMESPACE", "berth-system"), "namespace of the leader-election lease")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file; default: $KUBECONFIG, the in-cluster config or ~/.kube/config")
	fs.DurationVar(&c.opts.RetryInterval, "retry-interval", c.opts.RetryInterval, "how often a request waiting for time to pass is looked at again (nodes still joining, bookings that may expire)")
	fs.DurationVar(&c.opts.RetryBackoff, "retry-backoff", c.opts.RetryBackoff, "wait before a request answered CapacityIsNotFound is tried again; doubles after each try (cluster-autoscaler: 1m)")
	fs.DurationVar(&c.opts.MaxRetryBackoff, "max-retry-backoff", c.opts.MaxRetryBackoff, "the longest wait between tries of a request without capacity (cluster-autoscaler: 10m)")
	fs.DurationVar(&c.opts.BookingTTL, "booking-ttl", c.opts.BookingTTL, "how long after Provisioned a request books its capacity before BookingExpired, consumed or not (cluster-autoscaler: 10m)")
	fs.DurationVar(&c.opts.ProvisioningLatency, "provisioning-latency", c.opts.ProvisioningLatency, "how long after a scale-up its nodes join; a CapacityPool's "+autoscaler.LatencyAnnotation+" annotation overrides it")
	fs.DurationVar(&c.opts.ScanInterval, "scan-interval", c.opts.ScanInterval, "the loop: at most one request is answered or tried again per interval (cluster-autoscaler: one ProvisioningRequest per --scan-interval, 10s); 0 answers all at once")
	fs.DurationVar(&c.opts.NodeGroupBackoff, "node-group-backoff", c.opts.NodeGroupBackoff, "how long a CapacityPool whose scale-up failed (out of stock) is left out of scale-ups (cluster-autoscaler's --initial-node-group-backoff-duration: 5m); 0 never leaves it out")
	fs.BoolVar(&c.opts.AllowRevocation, "allow-revocation", false, "let the "+autoscaler.RevokeAnnotation+" annotation revoke a booking: a fault cluster-autoscaler never produces, for tests")
	fs.BoolVar(&c.opts.CapacityBufferController, "capacity-buffer-controller-enabled", false, "run the CapacityBuffer controller: resolve each buffer's pod template and replicas into its status (cluster-autoscaler's flag of that name)")
	fs.BoolVar(&c.opts.CapacityBufferPodInjection, "capacity-buffer-pod-injection-enabled", false, "keep ready CapacityBuffers' capacity provisioned: fit their fake pods each loop and scale up for the rest (cluster-autoscaler's flag of that name)")
	fs.BoolVar(&c.opts.ScaleUpUnschedulablePods, "scale-up-unschedulable-pods", true, "each loop, scale up one CapacityPool for the pods kube-scheduler marked unschedulable that fit no free room, as cluster-autoscaler always does")
	cutoff := fs.Int("expendable-pods-priority-cutoff", int(autoscaler.DefaultExpendablePodsPriorityCutoff), "pods of a priority below it are expendable: never scaled up for (cluster-autoscaler's flag of that name)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.version {
		return c, nil
	}
	if c.opts.RetryInterval <= 0 || c.opts.BookingTTL <= 0 || c.opts.RetryBackoff <= 0 {
		return c, errors.New("--retry-interval, --retry-backoff and --booking-ttl must be positive")
	}
	if c.opts.MaxRetryBackoff < c.opts.RetryBackoff {
		return c, errors.New("--max-retry-backoff must be at least --retry-backoff")
	}
	if c.opts.ProvisioningLatency < 0 || c.opts.ScanInterval < 0 {
		return c, errors.New("--provisioning-latency and --scan-interval must not be negative")
	}
	if *cutoff < math.MinInt32 || *cutoff > math.MaxInt32 {
		return c, fmt.Errorf("--expendable-pods-priority-cutoff %d is not a pod priority (a 32-bit integer)", *cutoff)
	}
	c.opts.ExpendablePodsPriorityCutoff = ptr.To(int32(*cutoff))
	return c, nil
}

// restConfig loads the kubeconfig file when one is named, else what
// controller-runtime finds.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "berth-autoscaler:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	zapOpts := zap.Options{}
	c, err := parseFlags(args, &zapOpts)
	if err != nil {
		return err
	}
	if c.version {
		fmt.Println(buildinfo.Get().String("berth-autoscaler"))
		return nil
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, berthv1.AddToScheme, autoscalingv1.AddToScheme, cbv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	cfg, err := restConfig(c.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: c.metricsAddr},
		HealthProbeBindAddress:  c.probeAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        "berth-autoscaler",
		LeaderElectionNamespace: c.namespace,
		GracefulShutdownTimeout: ptr.To(10 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := ctrlmetrics.Registry.Register(buildinfo.Get().Collector()); err != nil {
		return fmt.Errorf("registering berth_build_info: %w", err)
	}
	if err := autoscaler.Setup(mgr, c.opts); err != nil {
		return fmt.Errorf("setting up the autoscaler: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
