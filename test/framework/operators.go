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
// test/tools/build.sh from its Go module: its binary is <Name> and its CRD
// and webhook manifests are in <Name>-config in the tools directory.
type Operator struct {
	// Name of the binary and of its config directory: "jobset" or "lws".
	Name string
	// ConfigAPIVersion is the apiVersion of the operator's Configuration
	// file.
	ConfigAPIVersion string
	// CRD is the file name of its CRD in the config directory.
	CRD string
	// FeatureGates are written to the Configuration's featureGates: the
	// operator's alpha features the suite exercises.
	FeatureGates map[string]bool
}

// The operators the e2e suite knows.
var (
	// JobSetOperator is the JobSet controller (sigs.k8s.io/jobset).
	// RestartJob (alpha in v0.12) lets a failure policy restart one Job
	// alone, which berth must survive without re-queueing the gang.
	JobSetOperator = Operator{Name: "jobset", ConfigAPIVersion: "config.jobset.x-k8s.io/v1alpha1", CRD: "jobset.x-k8s.io_jobsets.yaml",
		FeatureGates: map[string]bool{"RestartJob": true}}
	// LWSOperator is the LeaderWorkerSet controller (sigs.k8s.io/lws).
	LWSOperator = Operator{Name: "lws", ConfigAPIVersion: "config.lws.x-k8s.io/v1alpha1", CRD: "leaderworkerset.x-k8s.io_leaderworkersets.yaml"}
)

// OperatorPlaneTimeout bounds the start of a plane that runs operators. It
// covers building them when the tool cache is empty (OperatorCRD waits for
// build.sh), which on a busy 2-core machine alone has taken more than 10
// minutes; the package's go test -timeout stays the outer bound.
const OperatorPlaneTimeout = 25 * time.Minute

// OperatorCRD is the path of the operator's CRD, to pass to StartWith. The
// operator is built first if it is not yet (controlplane.Ensure).
func OperatorCRD(ctx context.Context, o Operator) (string, error) {
	if err := controlplane.Ensure(ctx, controlplane.Component(o.Name)); err != nil {
		return "", fmt.Errorf("building the %s operator: %w", o.Name, err)
	}
	dir, err := controlplane.ResolveBinDir(ctx)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, o.Name+"-config", o.CRD)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("CRD of %s: %w (run test/tools/build.sh %s)", o.Name, err, o.Name)
	}
	return path, nil
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
