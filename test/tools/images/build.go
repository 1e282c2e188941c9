package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildinfoPkg holds the variables the linker stamps with -X.
const buildinfoPkg = "github.com/berth-dev/berth/cmd/internal/buildinfo"

// buildOptions are the build subcommand's inputs.
type buildOptions struct {
	// source is the berth checkout; out receives everything written.
	source, out string
	version     string
	// repo is the image repository prefix, e.g. ghcr.io/berth-dev.
	repo string
	// commit is stamped into the binaries and labels; empty asks git.
	commit    string
	caCerts   string
	platforms []v1.Platform
	// created is every timestamp written: SOURCE_DATE_EPOCH, else 1970.
	created time.Time
}

func parseBuildFlags(args []string) (buildOptions, error) {
	var o buildOptions
	var platforms string
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.StringVar(&o.source, "source", "", "the berth checkout to build")
	fs.StringVar(&o.out, "out", "", "directory to write the OCI layout, tarballs and digests into")
	fs.StringVar(&o.version, "version", "", "release version: the image tag and the binaries' --version")
	fs.StringVar(&o.repo, "repo", "", "image repository prefix, e.g. ghcr.io/berth-dev")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	fs.StringVar(&o.commit, "commit", "", "source revision (default: git rev-parse HEAD, -dirty when the tree has changes)")
	fs.StringVar(&o.caCerts, "ca-certs", defaultHostCABundle, "PEM CA bundle to copy into the images")
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	if err := required(fs, "source", "out", "version", "repo"); err != nil {
		return o, err
	}
	// Every tag the build writes must parse; checking one up front fails
	// before minutes of compiling rather than after.
	if _, err := name.NewTag(o.repo+"/"+binaries[0]+":"+o.version, name.StrictValidation); err != nil {
		return o, fmt.Errorf("%w: build: --repo %q with --version %q is not an image reference: %w", errUsage, o.repo, o.version, err)
	}
	var err error
	if o.platforms, err = parsePlatforms(platforms); err != nil {
		return o, fmt.Errorf("%w: build: %w", errUsage, err)
	}
	if o.created, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		return o, err
	}
	for _, p := range []*string{&o.source, &o.out} {
		if *p, err = filepath.Abs(*p); err != nil {
			return o, fmt.Errorf("resolving %s: %w", *p, err)
		}
	}
	return o, nil
}

// parsePlatforms reads --platforms. Only linux is accepted, the images
// being Linux filesystems, and no variant, since go build is given none.
func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--platforms %q: %w", f, err)
		}
		if p.OS != "linux" || p.Architecture == "" || p.Variant != "" {
			return nil, fmt.Errorf("--platforms %q: want linux/ARCH, e.g. linux/arm64", f)
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("--platforms: %s given twice", p)
		}
		seen[p.String()] = true
		out = append(out, *p)
	}
	return out, nil
}

// sourceDateEpoch is the reproducible-builds timestamp
// (https://reproducible-builds.org/specs/source-date-epoch/): the given
// seconds, or the Unix epoch when unset.
func sourceDateEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want non-negative seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// resolveCommit asks git for the checkout's revision: "-dirty" when the
// tree has changes, "unknown" outside a repository (a source tarball).
func resolveCommit(ctx context.Context, source string) string {
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

// compiler writes binary, built for p, to the file out. goBuild is the real
// one; tests pass a fake so they need no compiler run.
type compiler func(ctx context.Context, o buildOptions, binary string, p v1.Platform, out string) error

// goBuild runs go build in the source checkout for one binary and platform.
func goBuild(ctx context.Context, o buildOptions, binary string, p v1.Platform, out string) error {
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.commit=%s", buildinfoPkg, o.version, buildinfoPkg, o.commit)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/"+binary)
	cmd.Dir = o.source
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture,
		// The platform has no variant, so the binary must run on any CPU
		// of the architecture, whatever the builder's environment says.
		"GOAMD64=v1", "GOARM64=v8.0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/%s for %s: %w", binary, p, err)
	}
	return nil
}

// platformSuffix names a platform in file names: linux-arm64.
func platformSuffix(p v1.Platform) string {
	return p.OS + "-" + p.Architecture
}

// built is what one binary's build wrote.
type built struct {
	ref    string
	digest v1.Hash
	images []builtImage
}

// builtImage is one platform's image and its docker tarball.
type builtImage struct {
	platform v1.Platform
	digest   v1.Hash
	tarball  string
	size     int64
}

// build writes both binaries' images to o.out and a summary to w. The
// binaries are compiled one at a time: each go build already uses every
// core.
func build(ctx context.Context, o buildOptions, compile compiler, w io.Writer) error {
	start := time.Now()
	if o.commit == "" {
		o.commit = resolveCommit(ctx, o.source)
	}
	work, err := os.MkdirTemp("", "berth-images-")
	if err != nil {
		return fmt.Errorf("creating a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	entries, err := baseEntries(o.caCerts)
	if err != nil {
		return err
	}
	base, err := layerAt(filepath.Join(work, "base.tar.gz"), entries, o.created)
	if err != nil {
		return err
	}
	lp, err := newLayout(filepath.Join(o.out, "oci"))
	if err != nil {
		return err
	}
	var all []built
	for _, bin := range binaries {
		b, err := buildBinary(ctx, o, compile, bin, base, work, lp)
		if err != nil {
			return err
		}
		all = append(all, b)
	}
	return printSummary(w, o, all, time.Since(start))
}

// newLayout starts an empty OCI layout at dir. A previous build's layout
// is removed first: appending to it would list each image twice.
func newLayout(dir string) (layout.Path, error) {
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("removing the previous layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", filepath.Dir(dir), err)
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("creating the OCI layout %s: %w", dir, err)
	}
	return lp, nil
}

// buildBinary compiles bin for every platform, writes each platform's
// docker tarball, then the multi-platform index to the layout and its
// digest to <bin>.digest.
func buildBinary(ctx context.Context, o buildOptions, compile compiler, bin string, base v1.Layer, work string, lp layout.Path) (built, error) {
	m := buildMeta{binary: bin, version: o.version, commit: o.commit, created: o.created}
	b := built{ref: o.repo + "/" + bin + ":" + o.version}
	tag, err := name.NewTag(b.ref, name.StrictValidation)
	if err != nil {
		return b, fmt.Errorf("image reference %s: %w", b.ref, err)
	}
	var imgs []platformImage
	for _, p := range o.platforms {
		fmt.Fprintf(os.Stderr, "building %s for %s\n", bin, p)
		exe := filepath.Join(work, bin+"-"+platformSuffix(p))
		if err := compile(ctx, o, bin, p, exe); err != nil {
			return b, err
		}
		layer, err := layerAt(exe+".tar.gz", binaryEntries(bin, exe), o.created)
		if err != nil {
			return b, err
		}
		img, err := newImage(m, p, base, layer)
		if err != nil {
			return b, err
		}
		bi, err := writeTarball(o, bin, tag, p, img)
		if err != nil {
			return b, err
		}
		b.images = append(b.images, bi)
		imgs = append(imgs, platformImage{platform: p, image: img})
	}
	idx := newIndex(m, imgs)
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{keyRefName: b.ref})); err != nil {
		return b, fmt.Errorf("writing %s to the OCI layout: %w", bin, err)
	}
	if b.digest, err = idx.Digest(); err != nil {
		return b, fmt.Errorf("%s index digest: %w", bin, err)
	}
	digestFile := filepath.Join(o.out, bin+".digest")
	if err := os.WriteFile(digestFile, []byte(b.digest.String()+"\n"), 0o644); err != nil {
		return b, fmt.Errorf("writing %s: %w", digestFile, err)
	}
	return b, nil
}

// writeTarball writes img as a docker-format tarball tagged tag: the format
// docker load, ctr images import and kind load image-archive read.
func writeTarball(o buildOptions, bin string, tag name.Tag, p v1.Platform, img v1.Image) (builtImage, error) {
	bi := builtImage{platform: p, tarball: filepath.Join(o.out, fmt.Sprintf("%s-%s-%s.tar", bin, o.version, platformSuffix(p)))}
	if err := tarball.WriteToFile(bi.tarball, tag, img); err != nil {
		return bi, fmt.Errorf("writing %s: %w", bi.tarball, err)
	}
	st, err := os.Stat(bi.tarball)
	if err != nil {
		return bi, fmt.Errorf("stat %s: %w", bi.tarball, err)
	}
	bi.size = st.Size()
	if bi.digest, err = img.Digest(); err != nil {
		return bi, fmt.Errorf("%s %s digest: %w", bin, p, err)
	}
	return bi, nil
}

// printSummary reports each index by the pinned reference the release
// bundle uses, and each platform's image and tarball.
func printSummary(w io.Writer, o buildOptions, all []built, took time.Duration) error {
	var buf bytes.Buffer
	for _, b := range all {
		fmt.Fprintf(&buf, "%s@%s\n", b.ref, b.digest)
		for _, bi := range b.images {
			fmt.Fprintf(&buf, "  %-12s %s  %s (%.1f MiB)\n", bi.platform.String(), bi.digest,
				filepath.Base(bi.tarball), float64(bi.size)/(1<<20))
		}
	}
	fmt.Fprintf(&buf, "wrote %s: oci/ (OCI layout), %d tarballs, %d digest files, commit %s, in %s\n",
		o.out, len(all)*len(o.platforms), len(all), o.commit, took.Round(time.Second))
	_, err := w.Write(buf.Bytes())
	return err
}
