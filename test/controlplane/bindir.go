package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// BinDirEnv names the environment variable that points the harness at a
// directory of prebuilt binaries (as printed by test/tools/build.sh), so CI
// can build once and every suite skips even the cache check.
const BinDirEnv = "BERTH_TOOLS_BIN"

// buildScript is the builder's path relative to the module root.
const buildScript = "test/tools/build.sh"

// ResolveBinDir returns the directory of control-plane binaries that Start
// uses when Options.BinDir is empty: $BERTH_TOOLS_BIN if set, else the
// directory test/tools/build.sh prints after building, or finding cached,
// the given components (all of them if none are given). Suites that start
// several planes, or tools that need the binaries (the demo), can call it
// once. The first build takes minutes; its progress goes to stderr.
func ResolveBinDir(ctx context.Context, components ...Component) (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	return build(ctx, components...)
}

// Ensure makes sure the components are in the directory ResolveBinDir
// returns, building them with test/tools/build.sh if they are not — also
// when $BERTH_TOOLS_BIN is set, so that a suite can ask for what only it
// needs (the JobSet and LeaderWorkerSet operators) when it needs it: make
// test gives its e2e phase only the plane's binaries, and builds the
// operators in the background meanwhile; build.sh waits for a build in
// progress instead of starting a second one.
func Ensure(ctx context.Context, components ...Component) error {
	dir, err := ResolveBinDir(ctx, components...)
	if err != nil {
		return err
	}
	missing := false
	for _, c := range components {
		if _, err := os.Stat(filepath.Join(dir, string(c))); err != nil {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	built, err := build(ctx, components...)
	if err != nil {
		return err
	}
	if filepath.Clean(built) != filepath.Clean(dir) {
		return fmt.Errorf("%s=%s lacks %v, which %s built in %s: point %s there or build them into it",
			BinDirEnv, dir, components, buildScript, built, BinDirEnv)
	}
	return nil
}

// build runs test/tools/build.sh for the components (all if none) and
// returns the directory it prints.
func build(ctx context.Context, components ...Component) (string, error) {
	script, err := findBuildScript(ctx)
	if err != nil {
		return "", err
	}
	args := []string{script}
	for _, c := range components {
		args = append(args, string(c))
	}
	cmd := exec.CommandContext(ctx, "bash", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	// A first build takes minutes; let the developer see why by passing the
	// builder's progress through, and keep a copy for the error.
	cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	// go build forks compilers: cancel the whole group, not just bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", script, strings.Join(args[1:], " "), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("%s printed no binary directory", script)
	}
	return dir, nil
}

// findBuildScript locates test/tools/build.sh. The source file's own path is
// tried first (it works from any working directory), then the main module
// of the go command, which covers binaries built with -trimpath.
func findBuildScript(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		script := filepath.Join(filepath.Dir(file), "..", "tools", "build.sh")
		if _, err := os.Stat(script); err == nil {
			return script, nil
		}
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locate %s: go env GOMOD: %w (set %s to skip building)", buildScript, err, BinDirEnv)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("locate %s: not inside a Go module (set %s to skip building)", buildScript, BinDirEnv)
	}
	script := filepath.Join(filepath.Dir(gomod), buildScript)
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("locate %s: %w (set %s to skip building)", buildScript, err, BinDirEnv)
	}
	return script, nil
}

// binaryPath returns the path of component's binary in dir, or an error that
// says how to get it.
func binaryPath(dir string, c Component) (string, error) {
	path := filepath.Join(dir, string(c))
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("%s not found in %s: run %s %s", c, dir, buildScript, c)
	case err != nil:
		return "", fmt.Errorf("%s: %w", c, err)
	case info.IsDir() || info.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s in %s is not an executable file", c, dir)
	}
	return path, nil
}
