package runner

import (
	"context"
	"fmt"
	"strconv"

	"github.com/berth-dev/berth/test/berthproc"
	"github.com/berth-dev/berth/test/repo"
)

// berthProcess is berth-controller running as a child process, so that its
// CPU time and memory are its own and its client metrics are its own.
type berthProcess struct {
	*berthproc.Process
	metricsURL string
}

// BuildBerth compiles cmd/berth-controller to bin (berthproc.Build).
func BuildBerth(ctx context.Context, rev, bin string) error { return berthproc.Build(ctx, rev, bin) }

// startBerth runs bin against the API server of kubeconfig with the given
// client QPS and burst and extra flags, logging to logPath, and returns once
// its readiness probe answers.
func startBerth(ctx context.Context, bin, kubeconfig, logPath string, qps float64, burst int, extra []string) (*berthProcess, error) {
	metricsPort, err := berthproc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--leader-elect=false",
		"--webhook-port=0",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
		// Plain HTTP: the runner scrapes without a token.
		"--metrics-secure=false",
		"--kube-api-qps=" + strconv.FormatFloat(qps, 'f', -1, 64),
		"--kube-api-burst=" + strconv.Itoa(burst),
	}
	p, err := berthproc.Start(ctx, berthproc.Options{Bin: bin, Kubeconfig: kubeconfig, LogPath: logPath, Args: append(args, extra...)})
	if err != nil {
		return nil, err
	}
	return &berthProcess{Process: p, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)}, nil
}

// repoRoot is the root of the berth checkout (repo.Root).
func repoRoot() string { return repo.MustRoot() }
