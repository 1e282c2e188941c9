package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/sim"
	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// simulateOptions are `simulate`'s flags.
type simulateOptions struct {
	scenario, model        string
	fromCluster            bool
	timeline               bool
	tracePath, mix, public string
	gpusPerNode            int32
	topologyLevel          string
	localQueue, namespace  string
	writeTrace             string
	policies               []string
	seed                   uint64
	output                 string
	plots, plotFormat      string
	decisions              string
	gpuResource            string
	tenantColumn, gpuUnit  string
	limit                  int
}

func newSimulate(e *env) *cobra.Command {
	o := &simulateOptions{}
	cmd := &cobra.Command{
		Use:   "simulate (-f SCENARIO | --from-cluster) (--trace FILE | --generate MIX | --import FILE)",
		Short: "Replay a workload trace on a model of the cluster under berth and the alternatives, and compare",
		Long: `Replays a trace of jobs against a model of a cluster, in virtual time and in this
process (no API server is touched), once per policy:

  uncoordinated  no queue: pods are created at submission, kube-scheduler binds them one by
                 one, cluster-autoscaler scales for pending pods, unaware of gangs
  quota-only     admission by quota and fair share, then an unpinned ProvisioningRequest,
                 then placement (Kueue's ProvisioningRequest check)
  berth          berth's own admission engine with pinned bookings

and prints what each cost: GPU-hours idle while gangs that could use them waited, GPU-hours
held by partial gangs, nodes created that their job could not use, time to start per class,
SLO attainment, node-hours and each ClusterQueue's share. The scenario is the berth objects you
apply (ResourceFlavors, ClusterQueues, LocalQueues, CapacityPools) and a sim.berth.dev/v1alpha1
Model of the node groups (boot latency, stockouts) and the autoscaler; see docs/coordination.md.

--import reads a public GPU-cluster trace (Philly, Helios, Alibaba PAI or a generic CSV
export), finding its columns by these header names, case-insensitively, the first present
of each line winning:

` + trace.ImportColumnsText(),
		Example: `  kubectl berth simulate -f test/simulation/mixed-training/scenario.yaml \
      --generate test/simulation/mixed-training/mix.yaml --plots out/
  kubectl berth simulate --from-cluster --model model.yaml --import cluster_log.csv -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), e) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.scenario, "filename", "f", "", "the scenario: berth objects and a Model (YAML or JSON)")
	f.BoolVar(&o.fromCluster, "from-cluster", false, "read the berth objects from the cluster")
	f.StringVar(&o.model, "model", "", "with --from-cluster, a file holding the Model document")
	f.StringVar(&o.tracePath, "trace", "", "a trace file (.csv, .yaml or .json)")
	f.StringVar(&o.mix, "generate", "", "a synthetic mix (YAML) to generate the trace from, with --seed")
	f.StringVar(&o.public, "import", "", "a public GPU-cluster trace (CSV: job id, submit time, GPUs, duration, virtual cluster or user)")
	f.Int32Var(&o.gpusPerNode, "gpus-per-node", 8, "with --import, the GPUs of one node: larger jobs become gangs of whole nodes")
	f.StringVar(&o.topologyLevel, "topology-level", "", "with --import, the topology level multi-node jobs require")
	f.StringVar(&o.localQueue, "local-queue", "default", "with --import, the LocalQueue jobs are submitted to")
	f.StringVar(&o.namespace, "namespace-of-jobs", "", "with --import, one namespace for every job (default: one per tenant)")
	f.IntVar(&o.limit, "limit", 0, "with --import, import only the first N jobs, in file order (0: all)")
	f.StringVar(&o.tenantColumn, "tenant-column", "", "with --import, the column naming each job's tenant, whose namespace it goes to (default: the first known tenant column)")
	f.StringVar(&o.gpuUnit, "gpu-unit", "auto", "with --import, how the GPU column counts: gpus, percent (of one GPU, rounded up to whole GPUs), or auto (percent for plan_gpu)")
	f.StringVar(&o.writeTrace, "write-trace", "", "also write the trace replayed (generated or imported) to this file (.csv or .yaml)")
	f.StringSliceVar(&o.policies, "policies", sim.Policies(), "the policies to compare")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the generated trace and of the nodes' boot latencies")
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	f.StringVar(&o.plots, "plots", "", "write the figures into this directory")
	f.StringVar(&o.plotFormat, "plot-format", "svg", "svg or png")
	f.StringVar(&o.decisions, "decisions", "", "write every decision of every run to this file (- for stderr)")
	f.BoolVar(&o.timeline, "timeline", false, "with -o json, add each job's submission, admission and start to every policy's results")
	f.StringVar(&o.gpuResource, "gpu-resource", "nvidia.com/gpu", "the resource the measures count")
	cmd.MarkFlagsMutuallyExclusive("filename", "from-cluster")
	cmd.MarkFlagsOneRequired("filename", "from-cluster")
	cmd.MarkFlagsMutuallyExclusive("trace", "generate", "import")
	cmd.MarkFlagsOneRequired("trace", "generate", "import")
	for _, name := range []string{"filename", "model", "trace", "generate", "import", "write-trace"} {
		_ = cmd.MarkFlagFilename(name, "yaml", "yml", "json", "csv")
	}
	_ = cmd.MarkFlagDirname("plots")
	_ = cmd.RegisterFlagCompletionFunc("policies", cobra.FixedCompletions(sim.Policies(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("gpu-unit", cobra.FixedCompletions([]string{"auto", "gpus", "percent"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("plot-format", cobra.FixedCompletions([]string{"svg", "png"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *simulateOptions) run(ctx context.Context, e *env) error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: use table or json", o.output)
	}
	if o.plotFormat != "svg" && o.plotFormat != "png" {
		return fmt.Errorf("--plot-format %q: use svg or png", o.plotFormat)
	}
	if o.timeline && o.output != "json" {
		return errors.New("--timeline goes with -o json: the table has no room for one row per job")
	}
	if err := sim.CheckPolicies(o.policies); err != nil {
		return fmt.Errorf("--policies: %w", err)
	}
	sc, err := o.loadScenario(ctx, e)
	if err != nil {
		return err
	}
	tr, err := o.loadTrace(e.streams.ErrOut)
	if err != nil {
		return err
	}
	if o.writeTrace != "" {
		if err := writeTraceFile(o.writeTrace, tr); err != nil {
			return err
		}
	}
	opts := sim.Options{Policies: o.policies, Seed: o.seed, GPUResource: corev1.ResourceName(o.gpuResource), Timeline: o.timeline}
	if o.decisions != "" {
		w, closeLog, err := openOutput(o.decisions, e.streams.ErrOut)
		if err != nil {
			return err
		}
		defer closeLog()
		opts.Log = w
	}
	rep, err := sim.Simulate(sc, tr, opts)
	if err != nil {
		return fmt.Errorf("simulating: %w", err)
	}
	if l := rep.LeftOut; l.Jobs > 0 {
		fmt.Fprintf(e.streams.ErrOut, "warning: left out %d jobs that can never fit the modelled cluster, even with every node group at maxNodes; "+
			"the largest, %s, asks for %d pods and %d GPUs\n", l.Jobs, l.Largest, l.LargestPods, l.LargestGPUs)
	}
	if o.plots != "" {
		files, err := rep.WritePlots(o.plots, o.plotFormat)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.streams.ErrOut, "figures: %s\n", strings.Join(files, ", "))
	}
	if o.output == "json" {
		return rep.WriteJSON(e.streams.Out)
	}
	return rep.WriteTable(e.streams.Out)
}

// loadScenario reads the scenario from its file, or its objects from the
// cluster and the model from --model.
func (o *simulateOptions) loadScenario(ctx context.Context, e *env) (sim.Scenario, error) {
	if !o.fromCluster {
		if o.model != "" {
			return sim.Scenario{}, errors.New("--model goes with --from-cluster; put the Model in the scenario file")
		}
		f, err := os.Open(o.scenario)
		if err != nil {
			return sim.Scenario{}, fmt.Errorf("reading the scenario: %w", err)
		}
		defer f.Close()
		return sim.ReadScenario(f, o.scenario)
	}
	var sc sim.Scenario
	if o.model != "" {
		f, err := os.Open(o.model)
		if err != nil {
			return sim.Scenario{}, fmt.Errorf("reading the model: %w", err)
		}
		defer f.Close()
		if sc.Model, err = sim.ReadModel(f, o.model); err != nil {
			return sim.Scenario{}, err
		}
	}
	c, err := e.client()
	if err != nil {
		return sim.Scenario{}, err
	}
	flavors, cqs, lqs, pools := &berthv1.ResourceFlavorList{}, &berthv1.ClusterQueueList{}, &berthv1.LocalQueueList{}, &berthv1.CapacityPoolList{}
	if err := c.List(ctx, flavors); err != nil {
		return sim.Scenario{}, fmt.Errorf("listing ResourceFlavors: %w", err)
	}
	if err := c.List(ctx, cqs); err != nil {
		return sim.Scenario{}, fmt.Errorf("listing ClusterQueues: %w", err)
	}
	if err := c.List(ctx, lqs); err != nil {
		return sim.Scenario{}, fmt.Errorf("listing LocalQueues: %w", err)
	}
	if err := c.List(ctx, pools); err != nil {
		return sim.Scenario{}, fmt.Errorf("listing CapacityPools: %w", err)
	}
	sc.Flavors, sc.ClusterQueues, sc.LocalQueues, sc.Pools = flavors.Items, cqs.Items, lqs.Items, pools.Items
	sc, err = sc.Complete()
	if err != nil {
		return sim.Scenario{}, fmt.Errorf("the cluster's objects: %w", err)
	}
	return sc, nil
}

// loadTrace reads, generates or imports the trace.
func (o *simulateOptions) loadTrace(stderr io.Writer) (trace.Trace, error) {
	switch {
	case o.tracePath != "":
		return trace.Read(o.tracePath)
	case o.mix != "":
		f, err := os.Open(o.mix)
		if err != nil {
			return trace.Trace{}, fmt.Errorf("reading the mix: %w", err)
		}
		defer f.Close()
		m, err := trace.ReadMix(f)
		if err != nil {
			return trace.Trace{}, fmt.Errorf("%s: %w", o.mix, err)
		}
		return trace.Generate(m, o.seed)
	}
	return o.importTrace(stderr)
}

// importTrace imports --import, telling stderr what it read and what it
// had to assume.
func (o *simulateOptions) importTrace(stderr io.Writer) (trace.Trace, error) {
	unit, err := gpuUnitOf(o.gpuUnit)
	if err != nil {
		return trace.Trace{}, err
	}
	f, err := os.Open(o.public)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("reading the trace to import: %w", err)
	}
	defer f.Close()
	opts := trace.ImportOptions{GPUsPerNode: o.gpusPerNode, GPUResource: o.gpuResource, TopologyLevel: o.topologyLevel,
		LocalQueue: o.localQueue, TenantColumn: o.tenantColumn, GPUUnit: unit, Limit: o.limit}
	if ns := o.namespace; ns != "" {
		opts.Namespace = func(string) string { return ns }
	}
	tr, stats, err := trace.Import(f, opts)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("%s: %w", o.public, err)
	}
	fmt.Fprintf(stderr, "imported %d of %d rows", stats.Imported, stats.Read)
	for _, reason := range slices.Sorted(maps.Keys(stats.Skipped)) {
		fmt.Fprintf(stderr, "; skipped %d: %s", stats.Skipped[reason], reason)
	}
	fmt.Fprintln(stderr)
	if stats.GPUUnit == trace.GPUUnitPercent {
		fmt.Fprintf(stderr, "read the GPU column %s as percent of one GPU, rounded up to whole GPUs (the simulator places whole GPUs); --gpu-unit gpus reads it as GPUs\n", stats.GPUColumn)
	}
	if stats.TenantColumn == "" && o.namespace == "" {
		fmt.Fprintf(stderr, "warning: %s has no tenant column (%s), so every job goes to namespace default; name one with --tenant-column, or use --namespace-of-jobs\n",
			o.public, strings.Join(trace.TenantColumns(), ", "))
	}
	return tr, nil
}

// gpuUnitOf reads --gpu-unit.
func gpuUnitOf(s string) (trace.GPUUnit, error) {
	switch s {
	case "auto":
		return trace.GPUUnitAuto, nil
	case string(trace.GPUUnitGPUs), string(trace.GPUUnitPercent):
		return trace.GPUUnit(s), nil
	}
	return "", fmt.Errorf("--gpu-unit %q: use auto, gpus or percent", s)
}

func writeTraceFile(path string, tr trace.Trace) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	write := trace.WriteYAML
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		write = trace.WriteCSV
	}
	if err := write(f, tr); err != nil {
		f.Close()
		return fmt.Errorf("writing the trace to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the trace to %s: %w", path, err)
	}
	return nil
}

// openOutput opens path for writing, "-" being stderr.
func openOutput(path string, stderr io.Writer) (io.Writer, func(), error) {
	if path == "-" {
		return stderr, func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return f, func() { _ = f.Close() }, nil
}
