package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/kubectl-berth/importkueue"
)

// createOptions are the flags every create command shares.
type createOptions struct {
	dryRun bool
	output string
}

func newCreate(e *env) *cobra.Command {
	root := &cobra.Command{Use: "create", Short: "Create a ClusterQueue, LocalQueue or ResourceFlavor"}
	root.AddCommand(newCreateClusterQueue(e), newCreateLocalQueue(e), newCreateFlavor(e))
	return root
}

func (o *createOptions) bind(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the object instead of creating it")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "with --dry-run: yaml (the default) or json")
}

// create creates obj, or prints it with --dry-run. The API server (and
// berth's webhooks) validate it; their message is the error.
func (o *createOptions) create(ctx context.Context, e *env, obj client.Object) error {
	if o.dryRun {
		p := importOptions{output: o.output}
		if p.output == "" {
			p.output = "yaml"
		}
		return p.print(e.streams.Out, importkueue.Result{Objects: []client.Object{obj}})
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	// Read before the create: the client clears the kind when it decodes
	// the answer into obj.
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
	}
	_, err = fmt.Fprintf(e.streams.Out, "%s/%s created\n", strings.ToLower(kind), obj.GetName())
	return err
}

func newCreateClusterQueue(e *env) *cobra.Command {
	var (
		o                               createOptions
		quotas                          []string
		cohort, strategy, nsSel, weight string
		within, reclaim                 string
	)
	cmd := &cobra.Command{
		Use:     "clusterqueue NAME --quota FLAVOR:RESOURCE=NOMINAL[:BORROWING[:LENDING]]...",
		Aliases: []string{"cq"},
		Short:   "Create a ClusterQueue",
		Example: `  kubectl berth create clusterqueue team-a --cohort gpus \
    --quota h200:nvidia.com/gpu=64:16 --quota h200:cpu=512 --namespace-selector team=a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			groups, err := parseQuotas(quotas)
			if err != nil {
				return err
			}
			cq := &berthv1.ClusterQueue{
				TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "ClusterQueue"},
				ObjectMeta: metav1.ObjectMeta{Name: args[0]},
				Spec: berthv1.ClusterQueueSpec{Cohort: cohort, ResourceGroups: groups, QueueingStrategy: berthv1.QueueingStrategy(strategy),
					Preemption: berthv1.ClusterQueuePreemption{WithinClusterQueue: berthv1.PreemptionMode(within),
						ReclaimWithinCohort: berthv1.PreemptionMode(reclaim)}},
			}
			// Required: unset selects no namespace, which a queue created
			// from the command line is never meant to; "" selects all.
			sel, err := metav1.ParseToLabelSelector(nsSel)
			if err != nil {
				return fmt.Errorf("--namespace-selector %q: %w", nsSel, err)
			}
			cq.Spec.NamespaceSelector = sel
			if weight != "" {
				q, err := resource.ParseQuantity(weight)
				if err != nil {
					return fmt.Errorf("--weight %q: %w", weight, err)
				}
				cq.Spec.FairSharing.Weight = &q
			}
			return o.create(cmd.Context(), e, cq)
		},
	}
	cmd.Flags().StringArrayVar(&quotas, "quota", nil, "FLAVOR:RESOURCE=NOMINAL[:BORROWING[:LENDING]], repeatable; flavors with the same resources form one resource group")
	cmd.Flags().StringVar(&cohort, "cohort", "", "the cohort the queue lends to and borrows from")
	cmd.Flags().StringVar(&strategy, "queueing-strategy", "", "BestEffortFIFO (the default) or StrictFIFO")
	cmd.Flags().StringVar(&nsSel, "namespace-selector", "", "label selector of the namespaces that may submit; '' for every namespace")
	cmd.Flags().StringVar(&weight, "weight", "", "fair-sharing weight (default 1)")
	cmd.Flags().StringVar(&within, "preempt-within", "", "preemption within the queue: Never, LowerPriority, LowerOrNewerEqualPriority")
	cmd.Flags().StringVar(&reclaim, "reclaim-within-cohort", "", "reclaiming lent quota: Never, LowerPriority, Any")
	_ = cmd.MarkFlagRequired("quota")
	_ = cmd.MarkFlagRequired("namespace-selector")
	for flag, values := range map[string][]string{
		"queueing-strategy": {"BestEffortFIFO", "StrictFIFO"}, "preempt-within": {"Never", "LowerPriority", "LowerOrNewerEqualPriority"},
		"reclaim-within-cohort": {"Never", "LowerPriority", "Any"},
	} {
		_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	o.bind(cmd)
	return cmd
}

// parseQuotas turns --quota flags into resource groups: the flavors that
// set the same resources share a group, in the order they first appear.
func parseQuotas(flags []string) ([]berthv1.ResourceGroup, error) {
	var flavors []string
	quotas := map[string][]berthv1.ResourceQuota{}
	for _, f := range flags {
		q, flavor, err := parseQuota(f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(flavors, flavor) {
			flavors = append(flavors, flavor)
		}
		quotas[flavor] = append(quotas[flavor], q)
	}
	var groups []berthv1.ResourceGroup
	for _, flavor := range flavors {
		var names []corev1.ResourceName
		for _, q := range quotas[flavor] {
			names = append(names, q.Name)
		}
		i := slices.IndexFunc(groups, func(g berthv1.ResourceGroup) bool { return slices.Equal(g.CoveredResources, names) })
		if i < 0 {
			groups = append(groups, berthv1.ResourceGroup{CoveredResources: names})
			i = len(groups) - 1
		}
		groups[i].Flavors = append(groups[i].Flavors, berthv1.FlavorQuotas{Name: flavor, Resources: quotas[flavor]})
	}
	// A resource belongs to one group: flavors that share one must set
	// the same resources.
	owner := map[corev1.ResourceName]string{}
	for _, g := range groups {
		for _, r := range g.CoveredResources {
			if other, ok := owner[r]; ok {
				return nil, fmt.Errorf("--quota: flavors %s and %s both set %s but not the same resources (%v and %v); "+
					"flavors that share a resource must set the same ones", other, g.Flavors[0].Name, r,
					resourcesOf(groups, other), g.CoveredResources)
			}
			owner[r] = g.Flavors[0].Name
		}
	}
	return groups, nil
}

// resourcesOf is the covered resources of the group of flavor.
func resourcesOf(groups []berthv1.ResourceGroup, flavor string) []corev1.ResourceName {
	for _, g := range groups {
		if g.Flavors[0].Name == flavor {
			return g.CoveredResources
		}
	}
	return nil
}

// parseQuota reads FLAVOR:RESOURCE=NOMINAL[:BORROWING[:LENDING]].
func parseQuota(s string) (berthv1.ResourceQuota, string, error) {
	bad := func(why string) (berthv1.ResourceQuota, string, error) {
		return berthv1.ResourceQuota{}, "", fmt.Errorf("--quota %q: %s (want FLAVOR:RESOURCE=NOMINAL[:BORROWING[:LENDING]], e.g. h200:nvidia.com/gpu=64:16)", s, why)
	}
	key, amounts, ok := strings.Cut(s, "=")
	flavor, res, ok2 := strings.Cut(key, ":")
	if !ok || !ok2 || flavor == "" || res == "" {
		return bad("no flavor, resource or amount")
	}
	parts := strings.Split(amounts, ":")
	if len(parts) > 3 {
		return bad("more than three amounts")
	}
	var qs []resource.Quantity
	for _, p := range parts {
		q, err := resource.ParseQuantity(p)
		if err != nil {
			return bad(fmt.Sprintf("%q is not a quantity", p))
		}
		qs = append(qs, q)
	}
	out := berthv1.ResourceQuota{Name: corev1.ResourceName(res), NominalQuota: qs[0]}
	if len(qs) > 1 {
		out.BorrowingLimit = &qs[1]
	}
	if len(qs) > 2 {
		out.LendingLimit = &qs[2]
	}
	return out, flavor, nil
}

func newCreateLocalQueue(e *env) *cobra.Command {
	var (
		o          createOptions
		cq, weight string
	)
	cmd := &cobra.Command{
		Use:     "localqueue NAME --clusterqueue CQ",
		Aliases: []string{"lq"},
		Short:   "Create a LocalQueue in the namespace (-n)",
		Example: `  kubectl berth create localqueue team -n team-a --clusterqueue team-a`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := e.namespace()
			if err != nil {
				return err
			}
			lq := &berthv1.LocalQueue{
				TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "LocalQueue"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: args[0]},
				Spec:       berthv1.LocalQueueSpec{ClusterQueue: cq},
			}
			if weight != "" {
				q, err := resource.ParseQuantity(weight)
				if err != nil {
					return fmt.Errorf("--weight %q: %w", weight, err)
				}
				lq.Spec.FairSharing = &berthv1.LocalQueueFairSharing{Weight: &q}
			}
			return o.create(cmd.Context(), e, lq)
		},
	}
	cmd.Flags().StringVar(&cq, "clusterqueue", "", "the ClusterQueue the LocalQueue submits to")
	cmd.Flags().StringVar(&weight, "weight", "", "its weight among the ClusterQueue's LocalQueues (default 1)")
	_ = cmd.MarkFlagRequired("clusterqueue")
	o.bind(cmd)
	return cmd
}

func newCreateFlavor(e *env) *cobra.Command {
	var (
		o              createOptions
		labels, levels []string
		provisioning   string
	)
	cmd := &cobra.Command{
		Use:     "resourceflavor NAME",
		Aliases: []string{"rf", "flavor"},
		Short:   "Create a ResourceFlavor",
		Example: `  kubectl berth create resourceflavor h200 --node-labels nvidia.com/gpu.product=NVIDIA-H200 \
    --topology-levels topology.kubernetes.io/zone,example.com/rack --provisioning IfNeeded`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rf := &berthv1.ResourceFlavor{
				TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "ResourceFlavor"},
				ObjectMeta: metav1.ObjectMeta{Name: args[0]},
				Spec:       berthv1.ResourceFlavorSpec{TopologyLevels: levels},
			}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return fmt.Errorf("--node-labels %q: want KEY=VALUE", l)
				}
				if rf.Spec.NodeLabels == nil {
					rf.Spec.NodeLabels = map[string]string{}
				}
				rf.Spec.NodeLabels[k] = v
			}
			if provisioning != "" {
				rf.Spec.Provisioning = &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningMode(provisioning)}
			}
			return o.create(cmd.Context(), e, rf)
		},
	}
	cmd.Flags().StringSliceVar(&labels, "node-labels", nil, "KEY=VALUE labels of the flavor's nodes, comma-separated")
	cmd.Flags().StringSliceVar(&levels, "topology-levels", nil, "node label keys of the topology levels, coarsest first, comma-separated")
	cmd.Flags().StringVar(&provisioning, "provisioning", "", "when to book capacity through ProvisioningRequests: Never, IfNeeded or Always")
	_ = cmd.RegisterFlagCompletionFunc("provisioning", cobra.FixedCompletions([]string{"Never", "IfNeeded", "Always"}, cobra.ShellCompDirectiveNoFileComp))
	o.bind(cmd)
	return cmd
}
