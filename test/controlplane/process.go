package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// logTailLines is how much of a component's log a start-up error quotes:
	// enough for a stack of flag errors or a fatal klog line with context,
	// short enough to read in a test failure.
	logTailLines = 30
	// stopGrace is how long a component gets to exit on SIGTERM before its
	// whole process group is killed.
	stopGrace = 5 * time.Second
	// pollInterval paces readiness probes; start-up takes seconds, so a
	// finer interval only burns CPU that the components need.
	pollInterval = 100 * time.Millisecond
)

// process is one component started by the harness (envtest runs etcd and the
// apiserver itself). It runs in its own process group so that Stop can reap
// anything it spawned, and it outlives the context that started it: a
// Ginkgo BeforeSuite context ends long before the suite does.
type process struct {
	name    Component
	logPath string
	cmd     *exec.Cmd
	logFile *os.File
	// done is closed once the process has been waited for; waitErr is its
	// exit status and must only be read after done is closed.
	done    chan struct{}
	waitErr error
}

// startProcess launches path with args, sending stdout and stderr to logPath
// (truncated first, so a log never mixes two runs). deathSignal is what the
// kernel sends the process if the test binary dies (Linux only).
func startProcess(name Component, path string, args, env []string, logPath string, deathSignal syscall.Signal) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log for %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr(deathSignal)
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop ends the process group: SIGTERM first so components flush their logs,
// SIGKILL after grace (at once if grace is 0), and a final SIGKILL to the
// group in any case so no child survives its leader.
func (p *process) stop(grace time.Duration) error {
	defer func() { _ = p.logFile.Close() }()
	pgid := p.cmd.Process.Pid
	if done, _ := p.exited(); !done {
		sig := syscall.SIGTERM
		if grace == 0 {
			sig = syscall.SIGKILL
		}
		_ = syscall.Kill(-pgid, sig)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group of %s (pgid %d): %w", p.name, pgid, err)
	}
	return nil
}

// failure wraps err with the component name and the tail of its log, which
// is where the actual reason (a bad flag, a port in use) is found.
func (p *process) failure(err error) error {
	return fmt.Errorf("%s: %w\n%s", p.name, err, logTail(p.logPath))
}

// logTail renders the last logTailLines lines of a log file for an error
// message, or says why it cannot.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log at %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return fmt.Sprintf("--- last %d lines of %s ---\n%s", len(lines), path, strings.Join(lines, "\n"))
}

// waitFor polls check until it reports ready, the process exits, or ctx ends;
// errors name the component and quote its log. check's error is the reason
// it is not ready yet and is only reported if the wait fails.
func (p *process) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		if done, err := p.exited(); done {
			if err == nil {
				err = errors.New("exit status 0")
			}
			if log, rerr := os.ReadFile(p.logPath); rerr == nil && bytes.Contains(log, []byte("address already in use")) {
				err = fmt.Errorf("%w (%w)", err, errPortTaken)
			}
			return p.failure(fmt.Errorf("exited before becoming %s: %w", what, err))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Errorf("not %s: %w (last probe: %w)", what, context.Cause(ctx), last))
		case <-ticker.C:
		}
	}
}

// errPortTaken says that a port chosen for a component was taken by
// another process before the component bound it (see freePort).
var errPortTaken = errors.New("its port was taken by another process")

// ownProbe is check, passing only once p itself listens on port: a health
// probe answered by another process on that port (another plane's
// component that took the port first) is not p being healthy.
func (p *process) ownProbe(port int, check func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := check(ctx); err != nil {
			return err
		}
		mine, err := listensOn(p.cmd.Process.Pid, port)
		if err != nil {
			return err
		}
		if !mine {
			return fmt.Errorf("127.0.0.1:%d answers, but not %s: %w", port, p.name, errPortTaken)
		}
		return nil
	}
}

// healthProbe returns a check that GETs url and wants 200. Components serve
// health on their secure port with a self-signed certificate they generate
// at start-up, so the probe, which only ever talks to loopback, does not
// verify it.
func healthProbe(url string) func(context.Context) error {
	client := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe of a test component
		},
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
		}
		return nil
	}
}

// freePort asks the kernel for an unused loopback port. The port is released
// before the component binds it, so another process could take it in
// between; the component would then fail to start with "address already in
// use" in its log, which the start-up error quotes.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return strconv.Atoi(port)
}
