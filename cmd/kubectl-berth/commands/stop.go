package commands

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// queueKinds are the kinds stop and resume take, by the names a user may
// type; LocalQueues are namespaced.
var queueKinds = map[string]struct {
	kind       string
	namespaced bool
}{
	"clusterqueue": {"ClusterQueue", false}, "clusterqueues": {"ClusterQueue", false},
	"localqueue": {"LocalQueue", true}, "localqueues": {"LocalQueue", true},
}

func newStop(e *env) *cobra.Command {
	var drain bool
	cmd := &cobra.Command{
		Use:   "stop (clusterqueue|localqueue) NAME [--drain]",
		Short: "Stop a queue: it admits nothing new; with --drain it also evicts what it admitted",
		Long: `Sets the queue's stopPolicy to Hold, or HoldAndDrain with --drain. A stopped
ClusterQueue admits none of its workloads; a stopped LocalQueue holds its own
workloads while its ClusterQueue goes on with the others. Admitted workloads
keep running unless --drain evicts them (their jobs are suspended and wait,
held, with the rest). resume undoes it.`,
		Example: `  kubectl berth stop clusterqueue training
  kubectl berth stop localqueue team-a --drain -n research`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: queueKindCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			policy := berthv1.StopPolicyHold
			if drain {
				policy = berthv1.StopPolicyHoldAndDrain
			}
			return e.setStopPolicy(cmd.Context(), args[0], args[1], policy)
		},
	}
	cmd.Flags().BoolVar(&drain, "drain", false, "also evict the workloads the queue admitted (stopPolicy HoldAndDrain)")
	return cmd
}

func newResume(e *env) *cobra.Command {
	return &cobra.Command{
		Use:               "resume (clusterqueue|localqueue) NAME",
		Short:             "Resume a stopped queue: its held workloads queue again",
		Example:           "  kubectl berth resume localqueue team-a -n research",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: queueKindCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.setStopPolicy(cmd.Context(), args[0], args[1], berthv1.StopPolicyNone)
		},
	}
}

func queueKindCompletion(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return []string{"clusterqueue", "localqueue"}, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// setStopPolicy patches a queue's spec.stopPolicy and says what it did.
func (e *env) setStopPolicy(ctx context.Context, kind, name string, policy berthv1.StopPolicy) error {
	k, ok := queueKinds[kind]
	if !ok {
		return fmt.Errorf("%q is not a queue kind: use clusterqueue or localqueue", kind)
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	var obj client.Object = &berthv1.ClusterQueue{}
	key := types.NamespacedName{Name: name}
	if k.namespaced {
		obj = &berthv1.LocalQueue{}
		if key.Namespace, err = e.namespace(); err != nil {
			return err
		}
	}
	patch := fmt.Appendf(nil, `{"spec":{"stopPolicy":%q}}`, policy)
	if err := e.patchSpec(ctx, c, obj, key, k.kind, patch); err != nil {
		return err
	}
	verb := map[berthv1.StopPolicy]string{berthv1.StopPolicyNone: "resumed", berthv1.StopPolicyHold: "stopped",
		berthv1.StopPolicyHoldAndDrain: "stopped and draining"}[policy]
	fmt.Fprintf(e.streams.Out, "%s %s %s\n", k.kind, describeKey(key), verb)
	return nil
}

func newDeactivate(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "deactivate workload NAME",
		Short: "Deactivate a Workload: it leaves its queue, and is evicted if admitted",
		Long: `Sets the Workload's spec.active to false. A pending Workload stops waiting for
quota; an admitted one is evicted (its job is suspended). It stays, with reason
Deactivated, until activate sets spec.active back.`,
		Example: "  kubectl berth deactivate workload job-train-3f2a1 -n research",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.setActive(cmd.Context(), args[0], args[1], false)
		},
	}
}

func newActivate(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "activate workload NAME",
		Short:   "Activate a deactivated Workload: it queues again",
		Example: "  kubectl berth activate workload job-train-3f2a1 -n research",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.setActive(cmd.Context(), args[0], args[1], true)
		},
	}
}

// setActive patches a Workload's spec.active.
func (e *env) setActive(ctx context.Context, kind, name string, active bool) error {
	if kind != "workload" && kind != "workloads" && kind != "workloads.berth.dev" {
		return fmt.Errorf("%q: only a workload can be activated or deactivated", kind)
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	ns, err := e.namespace()
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	patch := fmt.Appendf(nil, `{"spec":{"active":%t}}`, active)
	if err := e.patchSpec(ctx, c, &berthv1.Workload{}, key, "Workload", patch); err != nil {
		return err
	}
	verb := "deactivated"
	if active {
		verb = "activated"
	}
	fmt.Fprintf(e.streams.Out, "Workload %s %s\n", describeKey(key), verb)
	return nil
}

// patchSpec merge-patches obj's spec; a missing object is an error that
// names it.
func (e *env) patchSpec(ctx context.Context, c client.Client, obj client.Object, key types.NamespacedName, kind string, patch []byte) error {
	obj.SetName(key.Name)
	obj.SetNamespace(key.Namespace)
	err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s not found", kind, describeKey(key))
	}
	if err != nil {
		return fmt.Errorf("updating %s %s: %w", kind, describeKey(key), err)
	}
	return nil
}

func describeKey(k types.NamespacedName) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}
