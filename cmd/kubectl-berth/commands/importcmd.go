package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/berth-dev/berth/cmd/kubectl-berth/importkueue"
)

// importOptions are `import kueue`'s flags.
type importOptions struct {
	files       []string
	fromCluster bool
	output      string
}

func newImport(e *env) *cobra.Command {
	root := &cobra.Command{Use: "import", Short: "Convert another queue system's objects into berth's"}
	o := &importOptions{}
	kueueCmd := &cobra.Command{
		Use:   "kueue (-f FILE... | --from-cluster)",
		Short: "Convert Kueue's flavors, queues, priority classes and provisioning checks into berth's",
		Long: `Reads Kueue's ResourceFlavors (with their Topologies), ClusterQueues, LocalQueues,
WorkloadPriorityClasses, AdmissionChecks and ProvisioningRequestConfigs — kueue.x-k8s.io
v1beta1 or v1beta2, from files or from the cluster — and prints the berth objects they
become, to apply with kubectl apply -f -. What berth cannot carry is listed on stderr,
with the field and why.`,
		Example: `  kubectl berth import kueue -f queues.yaml | kubectl apply -f -
  kubectl berth import kueue --from-cluster > berth-queues.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), e) },
	}
	kueueCmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "a file of Kueue objects (YAML or JSON, - for stdin); repeatable")
	kueueCmd.Flags().BoolVar(&o.fromCluster, "from-cluster", false, "read Kueue's objects from the cluster")
	kueueCmd.Flags().StringVarP(&o.output, "output", "o", "yaml", "yaml or json")
	kueueCmd.MarkFlagsMutuallyExclusive("filename", "from-cluster")
	kueueCmd.MarkFlagsOneRequired("filename", "from-cluster")
	_ = kueueCmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = kueueCmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	root.AddCommand(kueueCmd)
	return root
}

func (o *importOptions) run(ctx context.Context, e *env) error {
	if o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("--output %q: use yaml or json", o.output)
	}
	in := &importkueue.Input{}
	var skipped []importkueue.Unmapped
	var err error
	if o.fromCluster {
		err = readCluster(ctx, e, in)
	} else {
		skipped, err = o.readFiles(e, in)
	}
	if err != nil {
		return err
	}
	res := importkueue.Convert(in)
	if err := o.print(e.streams.Out, res); err != nil {
		return err
	}
	skipped = append(skipped, res.Unmapped...)
	if len(skipped) > 0 {
		fmt.Fprintf(e.streams.ErrOut, "%d settings were not mapped:\n", len(skipped))
		return importkueue.WriteTable(e.streams.ErrOut, skipped)
	}
	return nil
}

func (o *importOptions) readFiles(e *env, in *importkueue.Input) ([]importkueue.Unmapped, error) {
	d, err := importkueue.NewDecoder()
	if err != nil {
		return nil, err
	}
	var skipped []importkueue.Unmapped
	for _, name := range o.files {
		r, closeFn, err := open(e, name)
		if err != nil {
			return nil, err
		}
		s, err := d.Decode(r, name, in)
		closeFn()
		if err != nil {
			return nil, err
		}
		skipped = append(skipped, s...)
	}
	return skipped, nil
}

// open opens a file, or stdin for "-".
func open(e *env, name string) (io.Reader, func(), error) {
	if name == "-" {
		return e.streams.In, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return f, func() { _ = f.Close() }, nil
}

func (o *importOptions) print(w io.Writer, res importkueue.Result) error {
	if o.output == "yaml" {
		return importkueue.WriteYAML(w, res.Objects)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": res.Objects})
}

// readCluster lists Kueue's objects in v1beta2, or in v1beta1 on a cluster
// that serves only that, converted by Kueue's own code. A kind the cluster
// does not serve is skipped.
func readCluster(ctx context.Context, e *env, in *importkueue.Input) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	s, err := scheme()
	if err != nil {
		return err
	}
	lists := []struct {
		v1beta2, v1beta1 client.ObjectList
		add              func(client.ObjectList)
	}{
		{&kueue.ResourceFlavorList{}, &kueuev1beta1.ResourceFlavorList{}, func(l client.ObjectList) {
			in.Flavors = append(in.Flavors, l.(*kueue.ResourceFlavorList).Items...)
		}},
		{&kueue.ClusterQueueList{}, &kueuev1beta1.ClusterQueueList{}, func(l client.ObjectList) {
			in.ClusterQueues = append(in.ClusterQueues, l.(*kueue.ClusterQueueList).Items...)
		}},
		{&kueue.LocalQueueList{}, &kueuev1beta1.LocalQueueList{}, func(l client.ObjectList) {
			in.LocalQueues = append(in.LocalQueues, l.(*kueue.LocalQueueList).Items...)
		}},
		{&kueue.WorkloadPriorityClassList{}, &kueuev1beta1.WorkloadPriorityClassList{}, func(l client.ObjectList) {
			in.PriorityClasses = append(in.PriorityClasses, l.(*kueue.WorkloadPriorityClassList).Items...)
		}},
		{&kueue.TopologyList{}, &kueuev1beta1.TopologyList{}, func(l client.ObjectList) {
			in.Topologies = append(in.Topologies, l.(*kueue.TopologyList).Items...)
		}},
		{&kueue.AdmissionCheckList{}, &kueuev1beta1.AdmissionCheckList{}, func(l client.ObjectList) {
			in.AdmissionChecks = append(in.AdmissionChecks, l.(*kueue.AdmissionCheckList).Items...)
		}},
		{&kueue.ProvisioningRequestConfigList{}, &kueuev1beta1.ProvisioningRequestConfigList{}, func(l client.ObjectList) {
			in.ProvisioningConfigs = append(in.ProvisioningConfigs, l.(*kueue.ProvisioningRequestConfigList).Items...)
		}},
		{&kueue.CohortList{}, &kueuev1beta1.CohortList{}, func(l client.ObjectList) {
			in.Cohorts = append(in.Cohorts, l.(*kueue.CohortList).Items...)
		}},
	}
	for _, l := range lists {
		err := c.List(ctx, l.v1beta2)
		if meta.IsNoMatchError(err) {
			if err = c.List(ctx, l.v1beta1); err == nil {
				err = s.Convert(l.v1beta1, l.v1beta2, nil)
			}
		}
		switch {
		case meta.IsNoMatchError(err):
			continue // Kueue does not serve this kind here
		case err != nil:
			return fmt.Errorf("listing Kueue's objects: %w", errors.Unwrap(err))
		}
		l.add(l.v1beta2)
	}
	return nil
}
