package controlplane

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"
)

// ExtraProcess is a program a test runs beside the plane (an operator such
// as the JobSet controller), stopped with the plane.
type ExtraProcess struct {
	// Name of the program; its log is Plane.LogPath(Component(Name)).
	Name string
	// Path of its binary.
	Path string
	// Args of its command line.
	Args []string
	// Ready reports nil once the program serves; Start waits for it.
	Ready func(context.Context) error
	// Timeout bounds the wait for Ready; default one minute.
	Timeout time.Duration
}

// StartProcess starts a program beside the plane and waits until it is
// ready. Plane.Stop stops it; if it exits first, the start-up error quotes
// the tail of its log.
func (p *Plane) StartProcess(ctx context.Context, e ExtraProcess) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return fmt.Errorf("start %s: the plane is stopped", e.Name)
	}
	proc, err := startProcess(Component(e.Name), e.Path, e.Args, nil, p.LogPath(Component(e.Name)), syscall.SIGKILL)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.procs = append(p.procs, proc)
	p.mu.Unlock()
	if e.Timeout <= 0 {
		e.Timeout = time.Minute
	}
	ctx, cancel := context.WithTimeoutCause(ctx, e.Timeout, fmt.Errorf("timed out after %s", e.Timeout))
	defer cancel()
	return proc.waitFor(ctx, "ready", e.Ready)
}

// FreePort returns an unused loopback port for a program a test starts.
func FreePort() (int, error) { return freePort() }

// TCPReady returns a Ready check that wants a listener on the loopback port.
func TCPReady(port int) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
}
