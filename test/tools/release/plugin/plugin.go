// Package plugin builds kubectl-berth's krew release: the binary
// cross-compiled for every platform krew installs it on, packed with the
// LICENSE into one archive per platform, and the krew manifest rendered
// from its template (config/krew/berth.yaml) with each archive's URL and
// sha256, so that `kubectl krew install` verifies what it downloads.
package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const (
	// Binary is the plugin's command: kubectl runs `kubectl berth` by
	// finding kubectl-berth on the PATH.
	Binary = "kubectl-berth"
	// buildinfoPkg holds the variables the linker stamps with -X, as the
	// images' binaries are stamped (test/tools/images).
	buildinfoPkg = "github.com/berth-dev/berth/cmd/internal/buildinfo"
	// ManifestPath is where, under Options.Out, the rendered manifest goes:
	// it is submitted to the krew index, not uploaded with the archives.
	ManifestPath = "krew/berth.yaml"
)

// Platform is one os/arch krew selects an archive by.
type Platform struct {
	OS, Arch string
}

// String is os/arch, as GOOS/GOARCH and the --platforms flag spell it.
func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Bin is the binary's file name on p: Windows runs only .exe files.
func (p Platform) Bin() string {
	if p.OS == "windows" {
		return Binary + ".exe"
	}
	return Binary
}

// ArchiveName is the file name of p's archive of version. krew unpacks
// .tar.gz on every platform, Windows included, so there is one format.
func (p Platform) ArchiveName(version string) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", Binary, version, p.OS, p.Arch)
}

// DefaultPlatforms are those a release ships the plugin for: where
// kubectl runs on people's machines and in CI.
func DefaultPlatforms() []Platform {
	return []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}
}

// ParsePlatforms reads a comma-separated os/arch list, e.g.
// linux/amd64,darwin/arm64.
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	seen := map[Platform]bool{}
	for _, f := range strings.Split(s, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want os/arch, e.g. darwin/arm64", f)
		}
		p := Platform{OS: goos, Arch: arch}
		if seen[p] {
			return nil, fmt.Errorf("platform %s given twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// DefaultBaseURL is where a GitHub release of version serves its assets.
func DefaultBaseURL(version string) string {
	return "https://github.com/berth-dev/berth/releases/download/" + version + "/"
}

// Options are a plugin build's inputs.
type Options struct {
	// Source is the berth checkout: ./cmd/kubectl-berth and LICENSE.
	Source string
	// Out receives the archives, and the manifest at ManifestPath.
	Out string
	// Template is the krew manifest to render (config/krew/berth.yaml).
	Template string
	// Version is the release, vX.Y.Z; Commit the source revision, both
	// stamped into the binary.
	Version, Commit string
	// BaseURL is the archives' URL without their names; empty means
	// DefaultBaseURL.
	BaseURL   string
	Platforms []Platform
	// Created is the time of every archive entry (SOURCE_DATE_EPOCH), so
	// that one source and toolchain give the same sha256 sums.
	Created time.Time
}

// Archive is one platform's packed plugin.
type Archive struct {
	Platform Platform
	// Path is the archive's file; SHA256 the hex digest of its bytes.
	Path, SHA256 string
}

// Compiler writes kubectl-berth, built from o.Source for p, to the file
// out. GoBuild is the real one; tests pass a fake so they need no
// compiler run.
type Compiler func(ctx context.Context, o Options, p Platform, out string) error

// GoBuild cross-compiles ./cmd/kubectl-berth as the images' binaries are
// built: static (no cgo), without local paths, stripped, with the version
// and commit stamped.
func GoBuild(ctx context.Context, o Options, p Platform, out string) error {
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.commit=%s", buildinfoPkg, o.Version, buildinfoPkg, o.Commit)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/"+Binary)
	cmd.Dir = o.Source
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch,
		// The selector names no CPU level, so the binary must run on any
		// CPU of the architecture, whatever the builder's environment says.
		"GOAMD64=v1", "GOARM64=v8.0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/%s for %s: %w", Binary, p, err)
	}
	return nil
}

// ResolveCommit asks git for the checkout's revision: "-dirty" when the
// tree has changes, "unknown" outside a repository (a source tarball).
func ResolveCommit(ctx context.Context, source string) string {
	rev, err := exec.CommandContext(ctx, "git", "-C", source, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(rev))
	status, err := exec.CommandContext(ctx, "git", "-C", source, "status", "--porcelain").Output()
	// A status that cannot be read is reported as dirty: claiming a clean
	// build that may not be one is the worse mistake.
	if err != nil || len(bytes.TrimSpace(status)) > 0 {
		return commit + "-dirty"
	}
	return commit
}

// Build compiles the plugin for every platform of o, one at a time (each
// go build already uses every core), packs each binary with the LICENSE,
// and renders the manifest; it reports each file written to w.
func Build(ctx context.Context, o Options, compile Compiler, w io.Writer) ([]Archive, error) {
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platform to build the plugin for")
	}
	// The template and the LICENSE are read first: a mistake in either
	// fails before minutes of compiling rather than after.
	tmpl, err := os.ReadFile(o.Template)
	if err != nil {
		return nil, fmt.Errorf("reading the krew manifest template: %w", err)
	}
	if _, err := parseTemplate(tmpl); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Template, err)
	}
	license, err := os.ReadFile(filepath.Join(o.Source, "LICENSE"))
	if err != nil {
		return nil, fmt.Errorf("reading the LICENSE to ship with the plugin: %w", err)
	}
	tmp, err := os.MkdirTemp("", "berth-plugin-")
	if err != nil {
		return nil, fmt.Errorf("creating a build directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", o.Out, err)
	}
	archives := make([]Archive, 0, len(o.Platforms))
	for _, p := range o.Platforms {
		a, err := buildOne(ctx, o, compile, p, tmp, license)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "wrote %s (sha256 %s)\n", a.Path, a.SHA256)
		archives = append(archives, a)
	}
	manifest, err := Render(tmpl, o.Version, o.BaseURL, archives)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Template, err)
	}
	path := filepath.Join(o.Out, ManifestPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating the directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintf(w, "wrote %s (kubectl-berth %s, %d platforms)\n", path, o.Version, len(archives))
	return archives, nil
}

// buildOne compiles and packs the plugin for p, using dir for the binary.
func buildOne(ctx context.Context, o Options, compile Compiler, p Platform, dir string, license []byte) (Archive, error) {
	bin := filepath.Join(dir, p.OS+"_"+p.Arch, p.Bin())
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return Archive{}, fmt.Errorf("creating a build directory for %s: %w", p, err)
	}
	if err := compile(ctx, o, p, bin); err != nil {
		return Archive{}, err
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return Archive{}, fmt.Errorf("reading the binary built for %s: %w", p, err)
	}
	data, err := pack([]entry{{name: p.Bin(), mode: 0o755, data: exe}, {name: "LICENSE", mode: 0o644, data: license}}, o.Created)
	if err != nil {
		return Archive{}, fmt.Errorf("packing the plugin for %s: %w", p, err)
	}
	path := filepath.Join(o.Out, p.ArchiveName(o.Version))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return Archive{}, fmt.Errorf("writing %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return Archive{Platform: p, Path: path, SHA256: hex.EncodeToString(sum[:])}, nil
}
