package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// berthProcess is berth-controller running as a child process, so that its
// CPU time and memory are its own and its client metrics are its own.
type berthProcess struct {
	cmd        *exec.Cmd
	exited     chan error
	metricsURL string
	logPath    string
	args       []string
}

// repoRoot is the root of the berth checkout this file is part of.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// BuildBerth compiles cmd/berth-controller to bin: of this checkout's
// working tree when rev is "", else of git revision rev (exported with git
// archive, so the working tree may be mid-edit).
func BuildBerth(ctx context.Context, rev, bin string) (err error) {
	src := repoRoot()
	if rev != "" {
		if src, err = os.MkdirTemp("", "berth-src-"); err != nil {
			return fmt.Errorf("exporting %s: %w", rev, err)
		}
		defer func() { err = errors.Join(err, os.RemoveAll(src)) }()
		export := exec.CommandContext(ctx, "bash", "-c", `set -o pipefail; git archive --format=tar "$1" | tar -x -C "$2"`, "export", rev, src)
		export.Dir = repoRoot()
		if out, err := export.CombinedOutput(); err != nil {
			return fmt.Errorf("exporting %s: %w\n%s", rev, err, out)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/berth-controller")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building berth-controller: %w\n%s", err, out)
	}
	return nil
}

// freePort returns a loopback port nobody listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startBerth runs bin against the API server of kubeconfig with the given
// client QPS and burst and extra flags, logging to logPath, and returns once
// its readiness probe answers.
func startBerth(ctx context.Context, bin, kubeconfig, logPath string, qps float64, burst int, extra []string) (*berthProcess, error) {
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--leader-elect=false",
		"--webhook-port=0",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
		// Plain HTTP: the runner scrapes without a token.
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort),
		"--kube-api-qps=" + strconv.FormatFloat(qps, 'f', -1, 64),
		"--kube-api-burst=" + strconv.Itoa(burst),
	}
	args = append(args, extra...)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating berth log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	// controller-runtime reads the kubeconfig from $KUBECONFIG: berth's own
	// flag set does not define --kubeconfig.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting berth-controller: %w", err)
	}
	p := &berthProcess{cmd: cmd, exited: make(chan error, 1), logPath: logPath, args: args,
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)}
	go func() {
		p.exited <- cmd.Wait()
		_ = logFile.Close()
	}()
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	if err := p.waitReady(ctx, ready, time.Minute); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

// waitReady polls url until it answers 200, the process exits, or timeout.
func (p *berthProcess) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("probing berth: %w", err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			return fmt.Errorf("berth-controller exited before it was ready (%w):\n%s", err, tail(p.logPath))
		case <-ctx.Done():
			return fmt.Errorf("berth-controller not ready within %s:\n%s", timeout, tail(p.logPath))
		case <-tick.C:
		}
	}
}

// pid of the process.
func (p *berthProcess) pid() int { return p.cmd.Process.Pid }

// running reports an error if the process has exited.
func (p *berthProcess) running() error {
	select {
	case err := <-p.exited:
		p.exited <- err
		return fmt.Errorf("berth-controller exited (%w):\n%s", err, tail(p.logPath))
	default:
		return nil
	}
}

// stop sends SIGTERM, waits up to 30 s, then kills the process group.
func (p *berthProcess) stop() error {
	if p.running() != nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err // for running()
		return nil
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.exited <- <-p.exited
		return errors.New("berth-controller did not stop within 30s of SIGTERM and was killed")
	}
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
