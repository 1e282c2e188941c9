// Package framework starts berth against a real control plane for the
// integration and e2e suites: a plane from test/controlplane with berth's
// CRDs and webhook installed, a client, and berth's manager running
// in-process, wired by setup.Setup as cmd/berth-controller wires it. Each
// suite starts what it needs — of berth, the parts it tests
// (setup.Options.Parts), the installed webhooks narrowed to match; StopBerth
// and StartBerth simulate a controller restart.
package framework

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/repo"
)

// Env is a control plane with berth's API installed.
type Env struct {
	// Plane is the running control plane.
	Plane *controlplane.Plane
	// Client talks to the plane directly (no cache), as a user would.
	Client client.Client
	// Scheme knows Kubernetes' and berth's types.
	Scheme *k8sruntime.Scheme

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan error
	current *setup.Berth
}

// RepoRoot is the root of the berth checkout (repo.Root).
func RepoRoot() string { return repo.MustRoot() }

// NewScheme returns a scheme with Kubernetes' and berth's types.
func NewScheme() (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering Kubernetes types: %w", err)
	}
	if err := berthv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering berth types: %w", err)
	}
	if err := setup.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Start brings up a plane (full: with controller-manager, scheduler and
// kwok) with berth's CRDs and webhook configuration.
func Start(ctx context.Context, full bool) (*Env, error) {
	return StartWith(ctx, StartOptions{Full: full})
}

// StartOptions configure StartWith.
type StartOptions struct {
	// Full adds kube-controller-manager, kube-scheduler and kwok.
	Full bool
	// CRDPaths are CRD files or directories installed besides berth's,
	// e.g. JobSetCRD().
	CRDPaths []string
	// ExtraArgs adds command-line flags per component (see
	// controlplane.Options.ExtraArgs), e.g. the API server's front proxy.
	ExtraArgs map[controlplane.Component][]string
}

// StartWith brings up a plane with berth's CRDs and webhook configuration
// and the extra CRDs of o.
func StartWith(ctx context.Context, o StartOptions) (*Env, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	root := RepoRoot()
	plane, err := controlplane.Start(ctx, controlplane.Options{
		Full:              o.Full,
		Scheme:            scheme,
		ExtraArgs:         o.ExtraArgs,
		CRDDirectoryPaths: append([]string{filepath.Join(root, "config", "crd", "bases")}, o.CRDPaths...),
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	c, err := client.New(plane.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating client: %w", err), plane.Stop())
	}
	return &Env{Plane: plane, Client: c, Scheme: scheme}, nil
}

// ModuleDir is the directory of a module berth requires (from the module
// cache), for the CRDs it ships.
func ModuleDir(module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not downloaded: run go mod download", module)
	}
	return dir, nil
}

// JobSetCRD is the JobSet CRD of the JobSet version berth is built with.
func JobSetCRD() (string, error) {
	dir, err := ModuleDir("sigs.k8s.io/jobset")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml"), nil
}

// LeaderWorkerSetCRD is the LeaderWorkerSet CRD of the LWS version berth
// is built with.
func LeaderWorkerSetCRD() (string, error) {
	dir, err := ModuleDir("sigs.k8s.io/lws")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "crd", "bases", "leaderworkerset.x-k8s.io_leaderworkersets.yaml"), nil
}

// RayCRDs are the RayJob and RayCluster CRDs of the KubeRay version berth
// is built with.
func RayCRDs() ([]string, error) {
	dir, err := ModuleDir("github.com/ray-project/kuberay/ray-operator")
	if err != nil {
		return nil, err
	}
	bases := filepath.Join(dir, "config", "crd", "bases")
	return []string{filepath.Join(bases, "ray.io_rayjobs.yaml"), filepath.Join(bases, "ray.io_rayclusters.yaml")}, nil
}

// TrainingOperatorCRDs are the PyTorchJob and MPIJob CRDs of the Kubeflow
// training-operator version berth is built with.
func TrainingOperatorCRDs() ([]string, error) {
	dir, err := ModuleDir("github.com/kubeflow/training-operator")
	if err != nil {
		return nil, err
	}
	crds := filepath.Join(dir, "manifests", "base", "crds")
	return []string{filepath.Join(crds, "kubeflow.org_pytorchjobs.yaml"), filepath.Join(crds, "kubeflow.org_mpijobs.yaml")}, nil
}

// TrainerCRDs are the TrainJob, TrainingRuntime and ClusterTrainingRuntime
// CRDs of the Kubeflow Trainer version berth is built with. go.mod replaces
// that version with apis/kubeflow-trainer, which holds its API
// package only: the CRDs are read from the release's own module, which go
// downloads into the module cache (from the cache when it is there).
func TrainerCRDs() ([]string, error) {
	const module = "github.com/kubeflow/trainer/v2"
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module)
	list.Dir = RepoRoot()
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("reading the version of %s berth requires: %w", module, err)
	}
	download := exec.Command("go", "mod", "download", "-json", module+"@"+strings.TrimSpace(string(out)))
	download.Dir = RepoRoot()
	raw, err := download.Output()
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w", module, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(raw, &mod); err != nil {
		return nil, fmt.Errorf("reading where go mod download put %s: %w", module, err)
	}
	if mod.Dir == "" {
		return nil, fmt.Errorf("go mod download named no directory for %s: %s", module, raw)
	}
	crds := filepath.Join(mod.Dir, "manifests", "base", "crds")
	return []string{filepath.Join(crds, "trainer.kubeflow.org_trainjobs.yaml"),
		filepath.Join(crds, "trainer.kubeflow.org_trainingruntimes.yaml"),
		filepath.Join(crds, "trainer.kubeflow.org_clustertrainingruntimes.yaml")}, nil
}

// BerthOptions configure StartBerth.
type BerthOptions struct {
	// Setup is passed to setup.Setup. Webhooks are always on; a zero
	// Engine means admission.DefaultOptions, as berth-controller runs.
	// Setup.Parts selects what berth runs (nil: all of it); the plane's
	// webhook configurations are narrowed to the webhooks it registers
	// (see followWebhooks).
	Setup setup.Options
	// NewClient, when set, builds the manager's client (e.g. to inject
	// faults with interceptor.NewClient).
	NewClient func(cfg *rest.Config, o client.Options) (client.Client, error)
	// WrapTransport, when set, wraps every request berth sends (its
	// clients, caches and events), e.g. to count its writes.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// StartBerth runs berth's manager in-process against the plane until
// StopBerth. Metrics and probes are off; the webhook server listens where
// the installed webhook configuration points, and the configuration keeps
// only the webhooks of the parts o selects.
//
// The webhook port was chosen free when the plane started, and berth
// binds it only now: another plane on the machine (make test runs two
// lanes) may have taken it meanwhile. Berth then starts on a new free
// port, the plane's webhook configurations pointed at it.
func (e *Env) StartBerth(o BerthOptions) (*setup.Berth, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel != nil {
		return nil, errors.New("berth is already running")
	}
	b, err := e.startBerth(o)
	for tries := 0; errors.Is(err, syscall.EADDRINUSE) && tries < 3; tries++ {
		if perr := e.moveWebhookPort(); perr != nil {
			return nil, errors.Join(err, perr)
		}
		b, err = e.startBerth(o)
	}
	return b, err
}

// startBerth starts berth's manager; e.mu is held.
func (e *Env) startBerth(o BerthOptions) (*setup.Berth, error) {
	wh := e.Plane.Env.WebhookInstallOptions
	cacheOpts, err := setup.CacheOptions()
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.Plane.Config)
	if o.WrapTransport != nil {
		cfg.Wrap(o.WrapTransport)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:                  cacheOpts,
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewClient:              o.NewClient,
		// A restart registers the same controllers again in this process;
		// their names are unique per manager, which is what matters.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
			TLSOpts: []func(*tls.Config){setup.HTTP1Only},
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.Setup.Webhooks = true
	if o.Setup.MetricsRegistry == nil {
		// Each start (a restart is a second start) gets its own registry.
		o.Setup.MetricsRegistry = prometheus.NewRegistry()
	}
	if o.Setup.PodGate.WebhookConfiguration == "" && len(wh.MutatingWebhooks) > 0 {
		// The plane installs the configuration under its file's name.
		o.Setup.PodGate.WebhookConfiguration = wh.MutatingWebhooks[0].Name
	}
	if o.Setup.Engine == (admission.Options{}) {
		o.Setup.Engine = admission.DefaultOptions()
	}
	b, err := setup.Setup(ctx, mgr, o.Setup)
	if err == nil {
		err = e.followWebhooks(ctx, mgr.GetWebhookServer().WebhookMux())
	}
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.Join(errors.New("berth's cache did not sync"), <-done)
	}
	// The API server calls the webhooks as soon as they are installed:
	// return only once the server answers.
	started := mgr.GetWebhookServer().StartedChecker()
	for started(nil) != nil {
		select {
		case err := <-done:
			cancel()
			return nil, fmt.Errorf("berth stopped before its webhook server started: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if o.Setup.PodGroups && o.Setup.PodGate.WebhookConfiguration != "" {
		if err := e.waitForHandOffCondition(ctx, o.Setup.PodGate.WebhookConfiguration); err != nil {
			cancel()
			return nil, errors.Join(err, <-done)
		}
	}
	e.cancel, e.done, e.current = cancel, done, b
	return b, nil
}

// Berth is the berth StartBerth started (nil while none runs).
func (e *Env) Berth() *setup.Berth {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current
}

// StartWithBerth starts a plane (StartWith) and berth on it (StartBerth),
// as most suites begin; the plane is stopped again if berth does not start.
func StartWithBerth(ctx context.Context, o StartOptions, b BerthOptions) (*Env, error) {
	env, err := StartWith(ctx, o)
	if err != nil {
		return nil, err
	}
	if _, err := env.StartBerth(b); err != nil {
		return nil, errors.Join(fmt.Errorf("starting berth: %w", err), env.Stop())
	}
	return env, nil
}

// StopBerth stops the manager started by StartBerth and waits for it.
func (e *Env) StopBerth() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel == nil {
		return nil
	}
	e.cancel()
	var err error
	select {
	case err = <-e.done:
	case <-time.After(time.Minute):
		err = errors.New("berth did not stop within a minute")
	}
	e.cancel, e.done, e.current = nil, nil, nil
	return err
}

// Stop stops berth and the plane.
func (e *Env) Stop() error {
	return errors.Join(e.StopBerth(), e.Plane.Stop())
}
