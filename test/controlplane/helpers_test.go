package controlplane_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// processesMentioning lists the live processes (other than this one) whose
// command line contains s. Every plane component names a path under the
// plane directory on its command line, so this finds leaked components.
func processesMentioning(s string) []string {
	var found []string
	self := strconv.Itoa(os.Getpid())
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, path := range cmdlines {
		pid := filepath.Base(filepath.Dir(path))
		if pid == self {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil || len(data) == 0 {
			continue // exited meanwhile, or a zombie awaiting its parent
		}
		cmdline := string(bytes.ReplaceAll(data, []byte{0}, []byte{' '}))
		if strings.Contains(cmdline, s) {
			found = append(found, pid+": "+cmdline)
		}
	}
	return found
}
