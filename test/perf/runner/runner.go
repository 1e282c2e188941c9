// Package runner runs a performance scenario against a real kube-apiserver
// and etcd: it starts a plane with berth's CRDs, runs the berth-controller
// binary as a child process (so its CPU time, memory and client requests
// are its own), creates the scenario's workloads on schedule, plays the job
// that runs each admitted workload for its runtime and then finishes it, and
// reports how close berth came to the floors the scenario imposes: the quota
// floor (scenario.Replay), the write floor (the controller's writes ÷ its
// client QPS) and the API floor (all writes ÷ the API server's throughput,
// measured on the same machine before the run).
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-dev/berth/test/perf/scenario"
)

// Mode says what the runner creates.
type Mode string

const (
	// ModeWorkloads creates Workload objects directly, as a job adapter
	// would, and finishes them by setting Finished=True.
	ModeWorkloads Mode = "workloads"
	// ModeJobs creates suspended batch/v1 Jobs, which berth turns into
	// Workloads and starts; a finished Job is deleted.
	ModeJobs Mode = "jobs"
)

// Preemption overrides.
const (
	// PreemptionScenario keeps the scenario's preemption policy.
	PreemptionScenario = "scenario"
	// PreemptionNever turns preemption off in every ClusterQueue.
	PreemptionNever = "never"
)

// Options configure a run. Zero values get the defaults documented per
// field.
type Options struct {
	// Scenario to run. Required.
	Scenario *scenario.Scenario
	// Mode: ModeWorkloads (default) or ModeJobs.
	Mode Mode
	// QPS and Burst of berth's client (--kube-api-qps, --kube-api-burst).
	// Default: berth's own defaults, 500 and 1000.
	QPS   float64
	Burst int
	// BerthArgs are extra berth-controller flags.
	BerthArgs []string
	// BerthBinary is a built berth-controller; default: build
	// ./cmd/berth-controller into Dir, from BerthRevision.
	BerthBinary string
	// BerthRevision is the git revision to build berth from; default: the
	// working tree.
	BerthRevision string
	// Preemption: PreemptionScenario (default) or PreemptionNever.
	Preemption string
	// CalibrationWorkloads is how many Workloads the API-floor calibration
	// writes (× 3 writes); 0 means the default, the scenario's workloads
	// but at least 500 and at most 5000; negative skips calibration.
	CalibrationWorkloads int
	// CalibrationWriters write concurrently during calibration. Default 16.
	CalibrationWriters int
	// Audit turns on the API server's audit log of berth's requests, which
	// splits them by resource and counts conflicts and errors. It is off by
	// default because the log costs the API server, the run's bottleneck,
	// CPU; requests are then counted by method from berth's own client
	// metrics (rest_client_requests_total).
	Audit bool
	// BinDir holds the control-plane binaries; default: see
	// controlplane.Options.BinDir.
	BinDir string
	// Dir keeps planes, logs and the berth binary; default: a temporary
	// directory, removed after the run unless KeepDir.
	Dir string
	// KeepDir keeps a temporary Dir.
	KeepDir bool
	// Timeout bounds the load phase, from the first create to the last
	// finish. Default 25 minutes.
	Timeout time.Duration
	// SampleInterval is how often ClusterQueue usage is sampled. Default
	// 250 ms.
	SampleInterval time.Duration
	// Creators and Finishers are how many creates and finish writes the
	// runner has in flight at most. Default 32 each.
	Creators, Finishers int
	// Progress receives a line every few seconds; nil: none.
	Progress io.Writer
	// Trace, when set, receives a line per workload transition the runner
	// sees (admitted, evicted, finish written), with the quota then in
	// use: for finding out what happened around a quota violation.
	Trace io.Writer
}

func (o *Options) defaults() error {
	if o.Scenario == nil {
		return errors.New("no scenario")
	}
	if o.Mode == "" {
		o.Mode = ModeWorkloads
	}
	if o.Mode != ModeWorkloads && o.Mode != ModeJobs {
		return fmt.Errorf("mode %q: want %s or %s", o.Mode, ModeWorkloads, ModeJobs)
	}
	if o.Preemption == "" {
		o.Preemption = PreemptionScenario
	}
	if o.Preemption != PreemptionScenario && o.Preemption != PreemptionNever {
		return fmt.Errorf("preemption %q: want %s or %s", o.Preemption, PreemptionScenario, PreemptionNever)
	}
	if o.QPS <= 0 {
		o.QPS = 500
	}
	if o.Burst <= 0 {
		o.Burst = 1000
	}
	if o.CalibrationWorkloads == 0 {
		o.CalibrationWorkloads = min(5000, max(500, o.Scenario.WorkloadCount()))
	}
	if o.CalibrationWriters <= 0 {
		o.CalibrationWriters = 16
	}
	if o.Timeout <= 0 {
		o.Timeout = 25 * time.Minute
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = 250 * time.Millisecond
	}
	if o.Creators <= 0 {
		o.Creators = 32
	}
	if o.Finishers <= 0 {
		o.Finishers = 32
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// Run runs the scenario and returns its report. A run that times out
// returns its partial report and an error.
func Run(ctx context.Context, o Options) (_ *Report, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "berth-perf-"); err != nil {
			return nil, fmt.Errorf("creating work directory: %w", err)
		}
		if !o.KeepDir {
			defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
		}
	}
	replay := scenario.Replay(o.Scenario)
	fmt.Fprintf(o.Progress, "quota floor (ideal greedy replay): %s\n", replay.Makespan)
	var cal *Calibration
	if o.CalibrationWorkloads > 0 {
		fmt.Fprintf(o.Progress, "calibrating the API server: %d workloads x 3 writes, %d writers\n", o.CalibrationWorkloads, o.CalibrationWriters)
		c, err := calibrate(ctx, o.BinDir, filepath.Join(dir, "calibration"), o.CalibrationWorkloads, o.CalibrationWriters)
		if err != nil {
			return nil, err
		}
		cal = &c
		fmt.Fprintf(o.Progress, "API server: %.0f writes/s\n", c.WritesPerSecond)
	}
	bin := o.BerthBinary
	if bin == "" {
		fmt.Fprintln(o.Progress, "building berth-controller")
		bin = filepath.Join(dir, "berth-controller")
		if err := BuildBerth(ctx, o.BerthRevision, bin); err != nil {
			return nil, err
		}
	}
	cl, err := startCluster(ctx, o.BinDir, filepath.Join(dir, "plane"), o.Audit)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.stop()) }()
	m, runErr := measure(ctx, &o, cl, bin, dir)
	if m == nil {
		return nil, runErr
	}
	return buildReport(&o, replay, cal, m), runErr
}
