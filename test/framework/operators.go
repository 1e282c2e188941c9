package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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
}

// The operators the e2e suite knows.
var (
	// JobSetOperator is the JobSet controller (sigs.k8s.io/jobset).
	JobSetOperator = Operator{Name: "jobset", ConfigAPIVersion: "config.jobset.x-k8s.io/v1alpha1", CRD: "jobset.x-k8s.io_jobsets.yaml"}
	// LWSOperator is the LeaderWorkerSet controller (sigs.k8s.io/lws).
	LWSOperator = Operator{Name: "lws", ConfigAPIVersion: "config.lws.x-k8s.io/v1alpha1", CRD: "leaderworkerset.x-k8s.io_leaderworkersets.yaml"}
)

// OperatorCRD is the path of the operator's CRD, to pass to StartWith.
func OperatorCRD(ctx context.Context, o Operator) (string, error) {
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
	raw, err := os.ReadFile(filepath.Join(e.Plane.BinDir, o.Name+"-config", "manifests.yaml"))
	if err != nil {
		return fmt.Errorf("reading %s webhook manifests: %w", o.Name, err)
	}
	point := func(cc *admissionv1.WebhookClientConfig) {
		path := "/"
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
		*cc = admissionv1.WebhookClientConfig{URL: &url, CABundle: ca}
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		var probe struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
			return fmt.Errorf("decoding %s webhook manifests: %w", o.Name, err)
		}
		var obj client.Object
		switch probe.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal([]byte(doc), m); err != nil {
				return fmt.Errorf("decoding %s %s: %w", o.Name, probe.Kind, err)
			}
			for i := range m.Webhooks {
				point(&m.Webhooks[i].ClientConfig)
			}
			obj = m
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal([]byte(doc), v); err != nil {
				return fmt.Errorf("decoding %s %s: %w", o.Name, probe.Kind, err)
			}
			for i := range v.Webhooks {
				point(&v.Webhooks[i].ClientConfig)
			}
			obj = v
		default:
			continue
		}
		// Prefixed: both operators name theirs "mutating-webhook-configuration".
		obj.SetName(o.Name + "-" + obj.GetName())
		if err := e.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("installing %s webhook configuration %s: %w", o.Name, obj.GetName(), err)
		}
	}
	return nil
}
