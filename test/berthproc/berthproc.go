// Package berthproc builds berth-controller and runs it as a child process,
// as a cluster runs it: its own flags, its own kubeconfig (an admin's, or a
// ServiceAccount token's to exercise the install's RBAC), its own CPU time
// and memory. The perf runner and the install and failover suites use it.
package berthproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/test/repo"
)

// repoRoot is the root of the berth checkout (repo.Root).
func repoRoot() string { return repo.MustRoot() }

// Build compiles cmd/berth-controller to bin: of this checkout's working
// tree when rev is "", else of git revision rev (exported with git archive,
// so the working tree may be mid-edit).
func Build(ctx context.Context, rev, bin string) (err error) {
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

// FreePort returns a TCP port on loopback that nothing listens on.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Options say how to run the process.
type Options struct {
	// Bin is the berth-controller binary (Build).
	Bin string
	// Kubeconfig is the file berth reads its API server and credentials
	// from ($KUBECONFIG: berth's flags have no --kubeconfig).
	Kubeconfig string
	// LogPath receives stdout and stderr.
	LogPath string
	// Args are berth's flags. --health-probe-bind-address is appended, so
	// it wins over one in Args: Start waits for /readyz on it. Unless Args
	// set --visibility-port, --visibility-port=0 is prepended: processes
	// on one host would all bind its default port.
	Args []string
	// ReadyTimeout bounds the wait for /readyz; a minute when zero.
	ReadyTimeout time.Duration
}

// Process is a running berth-controller.
type Process struct {
	cmd    *exec.Cmd
	exited chan error
	// LogPath is where its output goes.
	LogPath string
	// Args are the flags it runs with.
	Args []string
	// ProbeURL is its /readyz.
	ProbeURL string
}

// Start runs berth-controller and returns once its readiness probe answers.
func Start(ctx context.Context, o Options) (*Process, error) {
	probePort, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := slices.Clone(o.Args)
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--visibility-port") }) {
		args = append([]string{"--visibility-port=0"}, args...)
	}
	args = append(args, "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort))
	logFile, err := os.Create(o.LogPath)
	if err != nil {
		return nil, fmt.Errorf("creating berth log: %w", err)
	}
	cmd := exec.Command(o.Bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting berth-controller: %w", err)
	}
	p := &Process{cmd: cmd, exited: make(chan error, 1), LogPath: o.LogPath, Args: args,
		ProbeURL: fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)}
	go func() {
		p.exited <- cmd.Wait()
		_ = logFile.Close()
	}()
	timeout := o.ReadyTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	if err := p.WaitReady(ctx, timeout); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// WaitReady polls /readyz until it answers 200, the process exits, or
// timeout.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.ProbeURL, nil)
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
			return fmt.Errorf("berth-controller exited before it was ready (%w):\n%s", err, Tail(p.LogPath))
		case <-ctx.Done():
			return fmt.Errorf("berth-controller not ready within %s:\n%s", timeout, Tail(p.LogPath))
		case <-tick.C:
		}
	}
}

// PID of the process.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Running reports an error if the process has exited.
func (p *Process) Running() error {
	select {
	case err := <-p.exited:
		p.exited <- err
		return fmt.Errorf("berth-controller exited (%w):\n%s", err, Tail(p.LogPath))
	default:
		return nil
	}
}

// Stop sends SIGTERM, waits up to 30 s, then kills the process group.
func (p *Process) Stop() error {
	if p.Running() != nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err // for Running()
		return nil
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.exited <- <-p.exited
		return errors.New("berth-controller did not stop within 30s of SIGTERM and was killed")
	}
}

// Signal sends sig to the process: SIGSTOP pauses it (a stalled leader),
// SIGCONT resumes it, SIGKILL ends it with no chance to release its lease.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("sending %s to berth-controller %d: %w", sig, p.PID(), err)
	}
	return nil
}

// Exited returns a channel closed once the process has exited.
func (p *Process) Exited() <-chan struct{} {
	out := make(chan struct{})
	go func() {
		err := <-p.exited
		p.exited <- err
		close(out)
	}()
	return out
}

// Log returns everything the process wrote so far.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.LogPath)
	return string(data)
}

// Tail returns the last lines of a log file, for error messages.
func Tail(path string) string {
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
