// Package commands holds kubectl-berth's commands, one file per verb.
package commands

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// env is what every command needs: the kubeconfig flags and the streams.
type env struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

// NewRoot returns `kubectl berth` with every subcommand. The usual kubectl
// flags (--kubeconfig, --context, -n, ...) apply to all of them.
func NewRoot(streams genericiooptions.IOStreams) *cobra.Command {
	e := &env{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:           "kubectl-berth",
		Short:         "Work with berth's queues, jobs and Workloads",
		Long:          "kubectl berth works with berth, the GPU gang queue: list Workloads with their place in line and explain where a job stands and why it waits, create queues, stop and resume them, deactivate and activate Workloads, import Kueue's, simulate what a trace would do under berth and its alternatives, and see the version.",
		SilenceUsage:  true,
		SilenceErrors: false,
		// Shown as `kubectl berth` when run as a plugin.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl berth"},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	e.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newVersion(e), newImport(e), newCreate(e), newSimulate(e),
		newStop(e), newResume(e), newDeactivate(e), newActivate(e), newList(e), newExplain(e))
	return root
}

// scheme knows berth's, Kubernetes' and Kueue's types.
func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, berthv1.AddToScheme, kueuev1beta1.AddToScheme, kueue.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return s, nil
}

// client returns a client of the cluster the kubeconfig flags point at.
func (e *env) client() (client.Client, error) {
	cfg, err := e.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	s, err := scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return c, nil
}

// namespace is the namespace of -n, or of the kubeconfig's context.
func (e *env) namespace() (string, error) {
	ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace: %w", err)
	}
	return ns, nil
}
