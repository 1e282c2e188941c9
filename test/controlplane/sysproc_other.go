//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts a component in its own process group, so Stop can signal
// everything it spawned. Only Linux can also tie the child's life to ours.
func sysProcAttr(deathSignal syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
