//go:build linux

package controlplane

import "syscall"

// sysProcAttr puts a component in its own process group, so Stop can signal
// everything it spawned, and asks the kernel to kill it if the test binary
// dies without calling Stop (a panic, a timeout, ^C), so that no crashed run
// leaves an apiserver-less controller-manager spinning on a 2-core machine.
func sysProcAttr(deathSignal syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSignal}
}
