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
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
}

func parseFlags(args []string) (config, error) {
	var c config
	var berthArgs stringList
	fs := flag.NewFlagSet("berth-perf", flag.ContinueOnError)
	fs.StringVar(&c.scenario, "scenario", "smoke", "shipped scenario ("+strings.Join(scenario.Shipped(), ", ")+") or a YAML file")
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

func run(ctx context.Context, c config) error {
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
	if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
		return errors.Join(runErr, fmt.Errorf("creating report directory: %w", err))
	}
	if err := report.WriteJSON(c.out); err != nil {
		return errors.Join(runErr, err)
	}
	if err := report.WriteTable(os.Stdout); err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Printf("report: %s\n", c.out)
	return runErr
}
