package framework

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/berth-dev/berth/test/controlplane"
)

// Operator is a job operator the e2e suite runs beside berth, built by
// test/tools/build.sh from its Go module: its binary is <Name> and its CRDs
// and webhook manifests are in <Name>-config in the tools directory.
type Operator struct {
	// Name of the binary and of its config directory: "jobset" or "lws".
	Name string
	// ConfigAPIVersion is the apiVersion of the operator's Configuration
	// file.
	ConfigAPIVersion string
	// CRDs are the file names of its CRDs in the config directory: every
	// kind it watches, since an operator whose kind has no CRD stops once
	// its cache times out waiting for it.
	CRDs []string
	// FeatureGates are written to the Configuration's featureGates: the
	// operator's alpha features the suite exercises.
	FeatureGates map[string]bool
}

// The operators the e2e suite knows.
var (
	// JobSetOperator is the JobSet controller (sigs.k8s.io/jobset).
	// RestartJob (alpha in v0.12) lets a failure policy restart one Job
	// alone, which berth must survive without re-queueing the gang.
	JobSetOperator = Operator{Name: "jobset", ConfigAPIVersion: "config.jobset.x-k8s.io/v1alpha1", CRDs: []string{"jobset.x-k8s.io_jobsets.yaml"},
		FeatureGates: map[string]bool{"RestartJob": true}}
	// LWSOperator is the LeaderWorkerSet controller (sigs.k8s.io/lws). From
	// v0.9 it also runs the DisaggregatedSet controller, which needs its
	// CRD installed.
	LWSOperator = Operator{Name: "lws", ConfigAPIVersion: "config.lws.x-k8s.io/v1alpha1",
		CRDs: []string{"leaderworkerset.x-k8s.io_leaderworkersets.yaml", "disaggregatedset.x-k8s.io_disaggregatedsets.yaml"}}
)

// OperatorPlaneTimeout bounds the start of a plane that runs operators. It
// covers building them when the tool cache is empty (OperatorCRDs waits for
// build.sh), which on a busy 2-core machine alone has taken more than 10
// minutes; the package's go test -timeout stays the outer bound.
const OperatorPlaneTimeout = 25 * time.Minute

// OperatorCRDs are the paths of the operator's CRDs, to pass to StartWith.
// The operator is built first if it is not yet (controlplane.Ensure).
func OperatorCRDs(ctx context.Context, o Operator) ([]string, error) {
	if err := controlplane.Ensure(ctx, controlplane.Component(o.Name)); err != nil {
		return nil, fmt.Errorf("building the %s operator: %w", o.Name, err)
	}
	dir, err := controlplane.ResolveBinDir(ctx)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(o.CRDs))
	for _, crd := range o.CRDs {
		path := filepath.Join(dir, o.Name+"-config", crd)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("CRD of %s: %w (run test/tools/build.sh %s)", o.Name, err, o.Name)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// StartOperator runs the operator against the plane until the plane stops.
// Its webhooks are installed pointing at the operator on loopback, served
// with the plane's envtest certificate (the operator's own certificate
// management is off: it would need a Service in front of it). Leader
// election, metrics and probes are off.
func (e *Env) StartOperator(ctx context.Context, o Operator) error {
	wh := e.Plane.Env.WebhookInstallOptions
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: %s
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
`, o.ConfigAPIVersion, port, wh.LocalServingCertDir)
	if len(o.FeatureGates) > 0 {
		cfg += "featureGates:\n"
		for _, name := range slices.Sorted(maps.Keys(o.FeatureGates)) {
			cfg += fmt.Sprintf("  %s: %t\n", name, o.FeatureGates[name])
		}
	}
	cfgPath := filepath.Join(e.Plane.Dir, o.Name+"-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("writing %s configuration: %w", o.Name, err)
	}
	if err := e.installOperatorWebhooks(ctx, o, port, wh.LocalServingCAData); err != nil {
		return err
	}
	return e.Plane.StartProcess(ctx, controlplane.ExtraProcess{
		Name:  o.Name,
		Path:  filepath.Join(e.Plane.BinDir, o.Name),
		Args:  []string{"--config", cfgPath, "--kubeconfig", e.Plane.Kubeconfig, "--zap-log-level", "info"},
		Ready: controlplane.TCPReady(port),
	})
}

// installOperatorWebhooks creates the operator's webhook configurations
// with their clients pointed at 127.0.0.1:port.
func (e *Env) installOperatorWebhooks(ctx context.Context, o Operator, port int, ca []byte) error {
	file := filepath.Join(e.Plane.BinDir, o.Name+"-config", "manifests.yaml")
	// Prefixed: both operators name theirs "mutating-webhook-configuration".
	rename := func(_, name string) string { return o.Name + "-" + name }
	if err := createWebhooks(ctx, e.Client, file, fmt.Sprintf("https://127.0.0.1:%d", port), ca, rename); err != nil {
		return fmt.Errorf("installing %s webhooks: %w", o.Name, err)
	}
	return nil
}
