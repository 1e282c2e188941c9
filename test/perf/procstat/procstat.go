// Package procstat reads a process's CPU time and peak memory from /proc,
// for the perf runners' reports of berth and the control plane.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of CPU times in /proc/<pid>/stat. Linux exposes
// USER_HZ = 100 to user space on every architecture.
const userHZ = 100

// Sample is a process's CPU time and memory at one moment.
type Sample struct {
	// CPUSeconds is user + system time so far.
	CPUSeconds float64
	// PeakRSSBytes is the high-water mark of the resident set (VmHWM).
	PeakRSSBytes int64
}

// Read samples process pid from /proc.
func Read(pid int) (Sample, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Sample{}, fmt.Errorf("reading stat of pid %d: %w", pid, err)
	}
	fields, err := statFields(stat)
	if err != nil {
		return Sample{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	// After the command, fields[0] is the state (field 3); utime and stime
	// are fields 14 and 15.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Sample{}, fmt.Errorf("pid %d: malformed stat %q", pid, stat)
	}
	s := Sample{CPUSeconds: float64(utime+stime) / userHZ}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return Sample{}, fmt.Errorf("reading status of pid %d: %w", pid, err)
	}
	s.PeakRSSBytes = statusKB(status, "VmHWM") * 1024
	return s, nil
}

// statFields splits /proc/<pid>/stat after the parenthesised command, which
// may itself contain spaces and parentheses.
func statFields(stat []byte) ([]string, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed stat %q", stat)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return nil, fmt.Errorf("malformed stat %q", stat)
	}
	return fields, nil
}

// statusKB returns the kB value of a /proc/<pid>/status line, or 0.
func statusKB(status []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != key {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err == nil {
			return v
		}
	}
	return 0
}

// ChildrenNamed returns the pids of this process's children whose command
// is one of names (envtest starts etcd and kube-apiserver as children).
func ChildrenNamed(names ...string) map[string]int {
	out := map[string]int{}
	self := strconv.Itoa(os.Getpid())
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		comm := string(stat[open+1 : end])
		fields := strings.Fields(string(stat[end+1:]))
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		for _, n := range names {
			if comm == n {
				out[n] = pid
			}
		}
	}
	return out
}
