//go:build linux

package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listensOn reports whether process pid holds the loopback TCP listener on
// port. A component's health port was free when it was chosen and is
// bound by the component only later; in between another plane's
// component may take it, and then answers the health probe in our
// component's place while ours fails to bind. /proc/net/tcp names the
// listener's socket inode, and /proc/PID/fd the sockets pid holds.
func listensOn(pid, port int) (bool, error) {
	inode, err := listenerInode(port)
	if err != nil || inode == "" {
		return false, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, fmt.Errorf("reading the sockets of pid %d: %w", pid, err)
	}
	want := "socket:[" + inode + "]"
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && target == want {
			return true, nil
		}
	}
	return false, nil
}

// listenerInode is the socket inode of the listener on 127.0.0.1:port, ""
// if there is none.
func listenerInode(port int) (string, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", fmt.Errorf("reading the TCP sockets: %w", err)
	}
	defer func() { _ = f.Close() }()
	local := fmt.Sprintf("0100007F:%04X", port)
	const listen = "0A"
	s := bufio.NewScanner(f)
	for s.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(s.Text())
		if len(fields) < 10 || fields[1] != local || fields[3] != listen {
			continue
		}
		if _, err := strconv.ParseUint(fields[9], 10, 64); err != nil {
			return "", fmt.Errorf("socket inode %q of 127.0.0.1:%d: %w", fields[9], port, err)
		}
		return fields[9], nil
	}
	if err := s.Err(); err != nil {
		return "", fmt.Errorf("reading the TCP sockets: %w", err)
	}
	return "", nil
}
