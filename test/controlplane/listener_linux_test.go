//go:build linux

package controlplane

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestListensOn: the holder of a loopback listener is told from any other
// process, and a port nobody listens on has no holder.
func TestListensOn(t *testing.T) {
	port := listenHere(t)
	other := startSleeper(t)
	free, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		pid  int
		port int
		want bool
	}{
		{"the process that listens", os.Getpid(), port, true},
		{"another process", other.cmd.Process.Pid, port, false},
		{"a port nobody listens on", os.Getpid(), free, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := listensOn(tt.pid, tt.port)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("listensOn(%d, %d) = %v, want %v", tt.pid, tt.port, got, tt.want)
			}
		})
	}
}

// TestOwnProbe: a healthy answer on the component's port counts only when
// the component holds the port; another holder is errPortTaken, which
// startNodeComponents answers with new ports.
func TestOwnProbe(t *testing.T) {
	port := listenHere(t)
	healthy := func(context.Context) error { return nil }
	ours := &process{name: "this test", cmd: &exec.Cmd{Process: &os.Process{Pid: os.Getpid()}}}
	if err := ours.ownProbe(port, healthy)(context.Background()); err != nil {
		t.Fatalf("the holder's healthy answer: %v", err)
	}
	other := startSleeper(t)
	err := other.ownProbe(port, healthy)(context.Background())
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("another holder's answer: %v, want errPortTaken", err)
	}
	notYet := errors.New("not ready")
	if err := ours.ownProbe(port, func(context.Context) error { return notYet })(context.Background()); !errors.Is(err, notYet) {
		t.Fatalf("an unhealthy answer: %v, want the probe's own error", err)
	}
}

// listenHere listens on a free loopback port in this process until the
// test ends, and returns the port.
func listenHere(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// startSleeper starts a process that listens on nothing, stopped with the
// test.
func startSleeper(t *testing.T) *process {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep binary: %v", err)
	}
	p, err := startProcess("sleeper", sleep, []string{strconv.Itoa(600)}, nil, t.TempDir()+"/sleeper.log", 9)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop(0) })
	return p
}
