// Package repo finds the root of the berth checkout a test or tool runs in.
// Test binaries may be built with -trimpath (make test builds everything so,
// to share compiled packages with the release's images), where a source
// file's own path is module-relative and says nothing about the disk.
package repo

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// module is the berth module's path, as its go.mod declares it.
const module = "github.com/berth-dev/berth"

// Root returns the root of the berth checkout: the directory of this source
// file's module when the binary kept absolute source paths, else the first
// directory upwards from the working directory (where go test runs a
// package's binary) whose go.mod declares the berth module.
func Root() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "..")
		if isRoot(dir) {
			return dir, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the berth checkout: %w", err)
	}
	return findUp(wd)
}

// findUp returns the first directory from start upwards that holds the
// berth module's go.mod.
func findUp(start string) (string, error) {
	for dir := start; ; dir = filepath.Dir(dir) {
		if isRoot(dir) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("finding the berth checkout: no go.mod of %s in %s or above it", module, start)
		}
	}
}

// MustRoot is Root for test set-up, where no checkout is a broken harness.
func MustRoot() string {
	dir, err := Root()
	if err != nil {
		panic(err)
	}
	return dir
}

// isRoot reports whether dir holds the berth module's go.mod.
func isRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	return s.Scan() && s.Text() == "module "+module
}
