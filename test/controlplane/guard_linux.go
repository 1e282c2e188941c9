//go:build linux

package controlplane

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// watchdogScript waits until it is sent SIGTERM (which the kernel does when
// the test binary dies, see sysProcAttr), then kills the process groups
// given as arguments and its own group. It is the only way to tie envtest's
// etcd and apiserver to our lifetime: envtest starts them itself.
// (The arguments are negative pids; dash's kill takes them after -KILL but
// rejects "--".)
const watchdogScript = `trap 'kill -KILL "$@" 2>/dev/null; kill -KILL 0' TERM
while :; do sleep 86400 & wait $!; done`

// guardEnvtest starts a watchdog for envtest's processes, which are this
// process's children that name the plane directory on their command line
// (envtest gives each its own process group, so pid == pgid). Nothing else
// of this plane runs yet when it is called.
func (p *Plane) guardEnvtest() error {
	var groups []string
	for _, pid := range childrenMentioning(p.Dir) {
		groups = append(groups, "-"+strconv.Itoa(pid))
	}
	if len(groups) == 0 {
		return nil
	}
	// $0 names the plane, so ps shows whose watchdog this is.
	args := append([]string{"-c", watchdogScript, "berth-plane-watchdog:" + p.Dir}, groups...)
	proc, err := startProcess(watchdog, "/bin/sh", args, nil, filepath.Join(p.LogDir, "watchdog.log"), syscall.SIGTERM)
	if err != nil {
		return err
	}
	p.watchdog = proc
	return nil
}

// childrenMentioning returns the pids of this process's children whose
// command line contains s.
func childrenMentioning(s string) []int {
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, statPath := range stats {
		stat, err := os.ReadFile(statPath)
		if err != nil {
			continue // exited meanwhile
		}
		// The command name in parentheses may contain spaces; the parent pid
		// is the second field after its closing parenthesis.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		dir := filepath.Dir(statPath)
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(dir)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
