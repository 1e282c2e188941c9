// Command berth-perf runs a performance scenario against a real
// kube-apiserver and etcd with berth-controller, prints a report table and
// writes it as JSON. `make perf SCENARIO=<name>` runs it; see
// docs/performance.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/test/perf/burst"
	"github.com/berth-dev/berth/test/perf/runner"
	"github.com/berth-dev/berth/test/perf/scenario"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// config is the command line.
type config struct {
	scenario string
	out      string
	trace    string
	opts     runner.Options
	mode     string
	burst    burst.Options
	profile  string
}

func parseFlags(args []string) (config, error) {
	var c config
	var berthArgs stringList
	fs := flag.NewFlagSet("berth-perf", flag.ContinueOnError)
	fs.StringVar(&c.scenario, "scenario", "smoke", "shipped scenario ("+strings.Join(scenario.Shipped(), ", ")+"), a YAML file, or burst (on the full plane)")
	fs.IntVar(&c.burst.Gangs, "burst-gangs", 0, "burst: inference gangs that arrive; default 2000")
	fs.DurationVar(&c.burst.Window, "burst-window", 0, "burst: the time they arrive within; default 10s")
	fs.IntVar(&c.burst.Nodes, "burst-nodes", 0, "burst: 8-GPU nodes; default every pod's GPU plus an eighth")
	fs.StringVar(&c.profile, "burst-cpu-profile", "", "burst: write a CPU profile of this process, which runs berth in the burst scenario, to this file")
	fs.StringVar(&c.burst.APIServerProfile, "burst-apiserver-profile", "", "burst: a directory where each berth run writes a CPU profile of kube-apiserver (apiserver-<namespace>.pprof)")
	fs.IntVar(&c.burst.ProfileSeconds, "burst-profile-seconds", 0, "burst: how long kube-apiserver is profiled from the start of each berth run; default 30")
	fs.IntVar(&c.burst.JobWorkers, "burst-job-workers", 0, "burst: berth's --job-workers in the berth runs; default berth's own")
	fs.IntVar(&c.burst.ApplyWorkers, "burst-apply-workers", 0, "burst: berth's --apply-workers in the berth runs; default berth's own")
	fs.StringVar((*string)(&c.burst.Shape), "burst-shape", string(burst.ShapePods), "burst: what a gang is: pods (a pod group of plain pods), deployments (a Deployment scaled up from none to 1-4 replicas) or leaderworkersets (a LeaderWorkerSet of 1-4 pods per replica scaled up from none to one replica)")
	fs.IntVar(&c.burst.SchedulerQPS, "burst-scheduler-qps", 0, "burst: kube-scheduler's client QPS (burst twice that); default 500")
	fs.StringVar(&c.out, "out", "", "JSON report path; default bin/perf/<scenario>-<mode>-qps<qps>.json")
	fs.StringVar(&c.mode, "mode", string(runner.ModeWorkloads), "workloads: create Workloads as a job adapter would; jobs: create suspended batch/v1 Jobs")
	fs.Float64Var(&c.opts.QPS, "qps", 500, "berth's --kube-api-qps")
	fs.IntVar(&c.opts.Burst, "burst", 1000, "berth's --kube-api-burst")
	fs.StringVar(&c.opts.Preemption, "preemption", runner.PreemptionScenario, "scenario: the scenario's preemption policy; never: no preemption")
	fs.Var(&berthArgs, "berth-arg", "extra berth-controller flag, e.g. --berth-arg=--queue-status-interval=5s (repeatable)")
	fs.StringVar(&c.opts.BerthBinary, "berth-binary", "", "use this berth-controller instead of building ./cmd/berth-controller")
	fs.StringVar(&c.opts.BerthRevision, "berth-rev", "", "build berth from this git revision (git archive) instead of the working tree")
	fs.IntVar(&c.opts.CalibrationWorkloads, "calibration-workloads", 0, "workloads the API-floor calibration writes (x3 writes); 0: min(5000, scenario's); -1: skip")
	fs.BoolVar(&c.opts.Audit, "audit", false, "log berth's requests in the apiserver's audit log, to split them by resource and count conflicts (costs apiserver CPU); by default they are counted by method from berth's client metrics")
	fs.StringVar(&c.opts.Dir, "dir", "", "work directory for planes, logs and the berth binary; default: a temporary one")
	fs.BoolVar(&c.opts.KeepDir, "keep-dir", false, "keep the temporary work directory (logs, audit log)")
	fs.DurationVar(&c.opts.Timeout, "timeout", 0, "bound on the load phase; default 25m")
	fs.StringVar(&c.trace, "trace", "", "write a line per workload transition the runner sees to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.opts.BerthArgs = berthArgs
	c.opts.Mode = runner.Mode(c.mode)
	if c.out == "" {
		name := strings.TrimSuffix(filepath.Base(c.scenario), ".yaml")
		c.out = filepath.Join("bin", "perf", fmt.Sprintf("%s-%s-qps%g.json", name, c.mode, c.opts.QPS))
		if c.scenario == burstScenario {
			c.out = filepath.Join("bin", "perf", "burst.json")
		}
	}
	return c, nil
}

func main() { os.Exit(mainCode()) }

// mainCode runs the command and returns its exit code.
func mainCode() int {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// The runner's informer and the plane harness log through
	// controller-runtime; keep errors only.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "berth-perf:", err)
		return 1
	}
	return 0
}

// burstScenario is the scenario burst.Run runs on the full plane.
const burstScenario = "burst"

// reporter is what both kinds of run report.
type reporter interface {
	WriteJSON(path string) error
	WriteTable(w io.Writer) error
}

func run(ctx context.Context, c config) error {
	if c.scenario == burstScenario {
		c.burst.Progress = os.Stderr
		if c.profile != "" {
			f, err := os.Create(c.profile)
			if err != nil {
				return fmt.Errorf("creating CPU profile: %w", err)
			}
			defer func() { _ = f.Close() }()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("starting CPU profile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		report, err := burst.Run(ctx, c.burst)
		if report == nil {
			return err
		}
		return write(c.out, report, err)
	}
	s, err := scenario.Named(c.scenario)
	if err != nil {
		return err
	}
	c.opts.Scenario = s
	c.opts.Progress = os.Stderr
	if c.trace != "" {
		f, err := os.Create(c.trace)
		if err != nil {
			return fmt.Errorf("creating trace: %w", err)
		}
		defer func() { _ = f.Close() }()
		c.opts.Trace = f
	}
	report, runErr := runner.Run(ctx, c.opts)
	if report == nil {
		return runErr
	}
	return write(c.out, report, runErr)
}

// write saves the report as JSON at out and prints its table; runErr is
// the run's own error, returned with any of these.
func write(out string, report reporter, runErr error) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return errors.Join(runErr, fmt.Errorf("creating report directory: %w", err))
	}
	if err := report.WriteJSON(out); err != nil {
		return errors.Join(runErr, err)
	}
	if err := report.WriteTable(os.Stdout); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Printf("report: %s\n", out)
	return runErr
}
