package framework

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cbv1beta1 "github.com/berth-dev/berth/apis/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/test/controlplane"
)

// autoscalerAPIModule is the module of cluster-autoscaler's
// ProvisioningRequest API that berth is built with.
const autoscalerAPIModule = "k8s.io/autoscaler/cluster-autoscaler/apis"

// ProvisioningRequestCRD is the ProvisioningRequest CRD
// (autoscaling.x-k8s.io) of the cluster-autoscaler API version berth is
// built with.
func ProvisioningRequestCRD() (string, error) {
	dir, err := ModuleDir(autoscalerAPIModule)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "crd", "autoscaling.x-k8s.io_provisioningrequests.yaml"), nil
}

// StartWithProvisioning is StartWith plus the ProvisioningRequest CRD, with
// autoscaling.x-k8s.io/v1 registered in the Env's scheme.
func StartWithProvisioning(ctx context.Context, o StartOptions) (*Env, error) {
	crd, err := ProvisioningRequestCRD()
	if err != nil {
		return nil, err
	}
	o.CRDPaths = append(append([]string(nil), o.CRDPaths...), crd)
	env, err := StartWith(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := autoscalingv1.AddToScheme(env.Scheme); err != nil {
		return nil, errors.Join(fmt.Errorf("registering ProvisioningRequest types: %w", err), env.Stop())
	}
	return env, nil
}

// CapacityPoolCRD is berth's CapacityPool CRD.
func CapacityPoolCRD() string {
	return filepath.Join(RepoRoot(), "config", "crd", "bases", "berth.dev_capacitypools.yaml")
}

// CapacityBufferCRD is berth's CapacityBuffer CRD (autoscaling.x-k8s.io
// v1beta1, generated from apis/capacitybuffer), which berth-autoscaler
// serves with its CapacityBuffer options on.
func CapacityBufferCRD() string {
	return filepath.Join(RepoRoot(), "config", "autoscaler", "crd", "autoscaling.x-k8s.io_capacitybuffers.yaml")
}

// StartForAutoscaler brings up a plane (full: with controller-manager,
// scheduler and kwok) with only the CRDs berth-autoscaler reads —
// CapacityPool, ProvisioningRequest and CapacityBuffer — and no webhooks,
// for suites that run the autoscaler without berth. The Env's scheme knows
// Kubernetes', berth's, the ProvisioningRequest and the CapacityBuffer
// types; StartBerth is not for it.
func StartForAutoscaler(ctx context.Context, full bool) (*Env, error) {
	crd, err := ProvisioningRequestCRD()
	if err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	if err := autoscalingv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering ProvisioningRequest types: %w", err)
	}
	if err := cbv1beta1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering CapacityBuffer types: %w", err)
	}
	plane, err := controlplane.Start(ctx, controlplane.Options{
		Full:              full,
		Scheme:            scheme,
		CRDDirectoryPaths: []string{CapacityPoolCRD(), crd, CapacityBufferCRD()},
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
