// Package buildinfo says which build of berth is running: the version
// stamped at link time, the commit it was built from and the Go toolchain.
// Every binary prints it for --version and exports it as the
// berth_build_info metric, so an operator can tell from a scrape or a pod's
// log which release a cluster runs.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version and commit are set by the linker:
//
//	go build -ldflags "-X github.com/berth-dev/berth/cmd/internal/buildinfo.version=v0.3.0
//	  -X github.com/berth-dev/berth/cmd/internal/buildinfo.commit=$(git rev-parse HEAD)"
//
// `make build`, `make images` and `make release` do it. A plain `go build`
// leaves version at "devel" and takes the commit from the VCS stamp the Go
// toolchain records.
var (
	version = "devel"
	commit  = ""
)

// Info is one build's identity.
type Info struct {
	// Version is the release, e.g. v0.3.0, or "devel".
	Version string
	// Commit is the source revision, with "-dirty" when the tree had
	// uncommitted changes; "unknown" when neither the linker nor the Go
	// toolchain recorded it.
	Commit string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

// Get returns the running binary's build.
func Get() Info {
	return Info{Version: version, Commit: resolveCommit(commit, readVCS()), GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// vcs is what the Go toolchain stamped about the source tree.
type vcs struct {
	revision string
	modified bool
}

func readVCS() vcs {
	var v vcs
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.revision = s.Value
		case "vcs.modified":
			v.modified = s.Value == "true"
		}
	}
	return v
}

// resolveCommit prefers the linker's value, which a release build sets
// even where no .git directory exists (a source tarball).
func resolveCommit(stamped string, v vcs) string {
	switch {
	case stamped != "":
		return stamped
	case v.revision == "":
		return "unknown"
	case v.modified:
		return v.revision + "-dirty"
	default:
		return v.revision
	}
}

// String is the --version line: "berth-controller v0.3.0 (commit abc, go1.26.8, linux/amd64)".
func (i Info) String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s, %s, %s)", binary, i.Version, i.Commit, i.GoVersion, i.Platform)
}

// Collector is the berth_build_info gauge: always 1, its labels carry the
// build, in the convention of Prometheus' own *_build_info series.
func (i Info) Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_build_info",
		Help: "The build of berth that is running: version, commit and Go version as labels; always 1.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "commit": i.Commit, "goversion": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}
