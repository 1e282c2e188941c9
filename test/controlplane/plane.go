package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Component names one control-plane program. Its value is also the file
// name of the binary in Options.BinDir and of its log in Plane.LogDir
// (with a .log suffix).
type Component string

// The components a plane runs. Etcd and KubeAPIServer always run; the others
// only in a Full plane.
const (
	Etcd                  Component = "etcd"
	KubeAPIServer         Component = "kube-apiserver"
	KubeControllerManager Component = "kube-controller-manager"
	KubeScheduler         Component = "kube-scheduler"
	Kwok                  Component = "kwok"

	// watchdog is the harness's guard for envtest's processes, see
	// guardEnvtest; it is no Kubernetes component.
	watchdog Component = "watchdog"
)

// defaultStartTimeout bounds each component's start-up. A cold apiserver
// takes 3-4 s on two cores; the margin covers a machine busy compiling.
const defaultStartTimeout = 60 * time.Second

// Options configures a plane. The zero value is a valid apiserver-only plane
// that builds (or reuses cached) binaries and works in a temporary directory.
type Options struct {
	// BinDir holds the component binaries (etcd, kube-apiserver, and for a Full
	// plane kube-controller-manager, kube-scheduler, kwok and the kwok-stages
	// directory). Default: $BERTH_TOOLS_BIN, else the directory that
	// test/tools/build.sh prints after building or reusing cached binaries.
	BinDir string

	// CRDDirectoryPaths lists files or directories of CRD manifests to install
	// before Start returns. A missing path is an error, so a moved
	// config/crd fails loudly instead of testing without CRDs.
	CRDDirectoryPaths []string

	// Scheme tells envtest which CRD versions have conversion functions, so it
	// can point their conversion webhooks at the local webhook server.
	// Default: client-go's scheme.
	Scheme *runtime.Scheme

	// WebhookInstallOptions installs webhook configurations pointing at a local
	// webhook server, with a self-signed serving certificate. After Start,
	// Plane.Env.WebhookInstallOptions holds the host, port and certificate
	// directory to give the manager's webhook server.
	WebhookInstallOptions envtest.WebhookInstallOptions

	// Full adds kube-controller-manager, kube-scheduler and kwok, so pods are
	// scheduled onto fake nodes (see GPUNode) and Jobs run to completion.
	// Either way the apiserver keeps envtest's defaults, notably without the
	// ServiceAccount admission plugin: pods need no ServiceAccount object, so
	// a pod created right after its namespace never races the
	// serviceaccount controller.
	Full bool

	// Dir is the plane's working directory: logs/, the admin kubeconfig, etcd
	// data and certificates. Start empties etcd data and certificates from a
	// previous run, so every plane begins as a new cluster. Default: a new
	// temporary directory, removed by Stop unless KeepDir is set.
	Dir string

	// KeepDir keeps a temporary Dir after Stop, for reading component logs.
	KeepDir bool

	// ExtraArgs adds command-line flags per component, in --name=value or
	// --name form. A flag named here replaces the harness's (or envtest's)
	// value for it; repeat it to pass several values, e.g.
	// {KubeControllerManager: {"--controllers=*"}}.
	ExtraArgs map[Component][]string

	// KwokConfigPaths replaces the kwok Stage definitions (see RunFor for what
	// the default set does). Default: every *.yaml in BinDir/kwok-stages.
	KwokConfigPaths []string

	// StartTimeout bounds the start-up of each component. Default: 60s.
	// etcd and kube-apiserver always get at least the default: on a busy
	// 2-core machine a cold apiserver can take far longer than its usual
	// 3-4 s, and a shorter bound (set to make a test of another component
	// fail fast) must not make them fail instead.
	StartTimeout time.Duration
}

// Plane is a running control plane. Its methods are safe for concurrent use.
type Plane struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file, for kubectl and for
	// processes a test starts (the manager, the stand-in autoscaler).
	Kubeconfig string
	// Env is the envtest environment running etcd and kube-apiserver; it holds
	// the installed CRDs and the webhook serving options.
	Env *envtest.Environment
	// Dir is the plane's working directory (see Options.Dir).
	Dir string
	// LogDir holds one <component>.log per component.
	LogDir string
	// BinDir is the directory the binaries were taken from.
	BinDir string

	ownsDir bool
	keepDir bool

	mu sync.Mutex
	// procs are the components the harness runs itself, in start order.
	procs []*process
	// envLogs are the log files handed to envtest for etcd and the apiserver.
	envLogs []*os.File
	// watchdog kills envtest's processes if the test binary dies; nil where
	// the platform cannot notice that.
	watchdog *process
	stopped  bool
}

// Start brings up a plane and returns once every component is ready: the
// apiserver serves with CRDs and webhooks installed and, for a Full plane,
// the controller-manager and scheduler report healthy and a probe node has
// been made Ready by kwok and untainted by the node-lifecycle controller.
//
// ctx bounds the build of missing binaries and the start-up of the node
// components; envtest's start of etcd and the apiserver is bounded by
// StartTimeout instead (envtest retries it up to five times). The processes
// run until Stop, not until ctx ends. If Start fails it stops whatever it
// started, and the error names the failing component and quotes its log.
func Start(ctx context.Context, opts Options) (_ *Plane, err error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	components := []Component{Etcd, KubeAPIServer}
	if opts.Full {
		components = append(components, KubeControllerManager, KubeScheduler, Kwok)
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = ResolveBinDir(ctx, components...); err != nil {
			return nil, fmt.Errorf("control-plane binaries: %w", err)
		}
	}
	p, err := newPlane(opts, binDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Stop())
		}
	}()
	if err := p.startAPIServer(opts); err != nil {
		return nil, err
	}
	if opts.Full {
		if err := p.startNodeComponents(ctx, opts); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// newPlane prepares the working directory.
func newPlane(opts Options, binDir string) (*Plane, error) {
	p := &Plane{Dir: opts.Dir, BinDir: binDir, keepDir: opts.KeepDir}
	if p.Dir == "" {
		dir, err := os.MkdirTemp("", "berth-plane-")
		if err != nil {
			return nil, fmt.Errorf("create plane directory: %w", err)
		}
		p.Dir, p.ownsDir = dir, true
	}
	// Leftover certificates would make envtest skip generating its CA, and
	// leftover etcd data would resurrect objects: always start afresh.
	for _, sub := range []string{"etcd", "certs"} {
		if err := os.RemoveAll(filepath.Join(p.Dir, sub)); err != nil {
			return nil, fmt.Errorf("clean plane directory: %w", err)
		}
	}
	p.LogDir = filepath.Join(p.Dir, "logs")
	for _, sub := range []string{p.LogDir, filepath.Join(p.Dir, "etcd"), filepath.Join(p.Dir, "certs")} {
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return nil, fmt.Errorf("create plane directory: %w", err)
		}
	}
	p.Kubeconfig = filepath.Join(p.Dir, "kubeconfig")
	return p, nil
}

// LogPath returns the path of a component's log file.
func (p *Plane) LogPath(c Component) string {
	return filepath.Join(p.LogDir, string(c)+".log")
}

// startAPIServer runs etcd and kube-apiserver through envtest, installs CRDs
// and webhooks, and writes the admin kubeconfig.
func (p *Plane) startAPIServer(opts Options) error {
	etcdPath, err := binaryPath(p.BinDir, Etcd)
	if err != nil {
		return err
	}
	apiPath, err := binaryPath(p.BinDir, KubeAPIServer)
	if err != nil {
		return err
	}
	etcdLog, err := os.Create(p.LogPath(Etcd))
	if err != nil {
		return fmt.Errorf("open etcd log: %w", err)
	}
	apiLog, err := os.Create(p.LogPath(KubeAPIServer))
	if err != nil {
		_ = etcdLog.Close()
		return fmt.Errorf("open kube-apiserver log: %w", err)
	}
	// envtest writes to these until it stops the processes in Stop.
	p.envLogs = append(p.envLogs, etcdLog, apiLog)

	env := &envtest.Environment{
		// Paths are set explicitly below as well, because envtest prefers
		// $KUBEBUILDER_ASSETS over BinaryAssetsDirectory and a stray value
		// must not swap in other binaries.
		BinaryAssetsDirectory:    p.BinDir,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		WebhookInstallOptions:    opts.WebhookInstallOptions,
		Scheme:                   opts.Scheme,
		UseExistingCluster:       ptr.To(false),
		ControlPlaneStartTimeout: max(opts.StartTimeout, defaultStartTimeout),
		ControlPlaneStopTimeout:  stopGrace * 4,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: etcdPath, DataDir: filepath.Join(p.Dir, "etcd"), Out: etcdLog, Err: etcdLog}
	env.ControlPlane.APIServer = &envtest.APIServer{Path: apiPath, CertDir: filepath.Join(p.Dir, "certs"), Out: apiLog, Err: apiLog}
	if err := applyEnvtestArgs(env.ControlPlane.Etcd.Configure(), opts.ExtraArgs[Etcd]); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	if err := configureFrontProxy(env.ControlPlane.APIServer.Configure(), filepath.Join(p.Dir, "front-proxy")); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := applyEnvtestArgs(env.ControlPlane.APIServer.Configure(), opts.ExtraArgs[KubeAPIServer]); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	p.Env = env
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("start etcd and kube-apiserver: %w\n%s\n%s", err, logTail(p.LogPath(Etcd)), logTail(p.LogPath(KubeAPIServer)))
	}
	p.Config = cfg
	if err := p.guardEnvtest(); err != nil {
		return fmt.Errorf("guard etcd and kube-apiserver: %w", err)
	}
	if err := os.WriteFile(p.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("write admin kubeconfig: %w", err)
	}
	return nil
}

// Stop stops the node components (killing their process groups), then etcd
// and the apiserver, and removes a temporary Dir unless KeepDir is set. It is
// safe to call more than once; later calls do nothing.
func (p *Plane) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true

	// The harness's own components have no order dependency on each other,
	// so stop them together; each may take stopGrace.
	var wg sync.WaitGroup
	errs := make([]error, len(p.procs))
	for i, proc := range p.procs {
		wg.Go(func() { errs[i] = proc.stop(stopGrace) })
	}
	wg.Wait()
	if p.watchdog != nil {
		// SIGKILL: on SIGTERM it would kill etcd and the apiserver abruptly.
		errs = append(errs, p.watchdog.stop(0))
	}
	if p.Env != nil {
		if err := p.Env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop etcd and kube-apiserver: %w", err))
		}
	}
	for _, f := range p.envLogs {
		_ = f.Close()
	}
	if p.ownsDir && !p.keepDir {
		if err := os.RemoveAll(p.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove plane directory: %w", err))
		}
	}
	return errors.Join(errs...)
}
