// Package release tests what a release ships. TestImages runs `make images`
// and opens the result with the standard library only, as docker load and
// a registry would see it, so the main module never depends on the image
// tooling in test/tools/images.
//
// At full scale (BERTH_TEST_LONG=1, `make test-long`) it builds both
// platforms a release ships, linux/amd64 and linux/arm64; in `make test`
// only the host's, which is the one whose binaries it can run. Each
// platform is a full compile of both binaries, minutes on a small machine:
// run it with a generous timeout (`make test-unit` runs it so):
//
//	go test -count=1 -timeout 30m ./test/release/
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/test/scale"
)

const (
	version = "v0.0.0-test"
	// repo is the Makefile's default IMAGE_REPO.
	repo = "ghcr.io/berth-dev"
)

var binaries = []string{"berth-controller", "berth-autoscaler"}

func TestImages(t *testing.T) {
	dist := t.TempDir()
	start := time.Now()
	arches := imageArches(t)
	platforms := make([]string, len(arches))
	for i, arch := range arches {
		platforms[i] = "linux/" + arch
	}
	cmd := exec.CommandContext(t.Context(), "make", "-C", repoRoot(t), "images", "DIST="+dist, "VERSION="+version,
		"IMAGE_PLATFORMS="+strings.Join(platforms, ","))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	t.Logf("make images took %s:\n%s", time.Since(start).Round(time.Second), out)
	images := filepath.Join(dist, "images")

	t.Run("oci layout", func(t *testing.T) { checkLayout(t, images, platforms) })
	for _, bin := range binaries {
		t.Run(bin, func(t *testing.T) {
			byArch := map[string]*image{}
			for _, arch := range arches {
				img := readTarball(t, filepath.Join(images, bin+"-"+version+"-linux-"+arch+".tar"))
				checkImage(t, img, bin, arch)
				byArch[arch] = img
			}
			checkVersion(t, byArch[runtime.GOARCH], bin)
		})
	}
}

// imageArches are the architectures TestImages builds: the host's, or at
// full scale both that a release ships. The host must be one of them: the
// test runs the host's binary out of its image.
func imageArches(t *testing.T) []string {
	t.Helper()
	shipped := []string{"amd64", "arm64"}
	if runtime.GOOS != "linux" || !slices.Contains(shipped, runtime.GOARCH) {
		t.Fatalf("the images are linux/amd64 and linux/arm64: run this test on one of them, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if scale.Long() {
		return shipped
	}
	return []string{runtime.GOARCH}
}

// repoRoot walks up from the test's directory to the berth module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/berth-dev/berth\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no github.com/berth-dev/berth go.mod above the test's directory")
		}
		dir = parent
	}
}

// image is a docker-format tarball read back: its manifest.json entry, its
// config and every layer's files by path.
type image struct {
	repoTags []string
	config   imageConfig
	files    map[string]file
}

// file is one layer entry; a later layer's entry replaces an earlier one,
// as in the container's filesystem.
type file struct {
	hdr  *tar.Header
	data []byte
}

// imageConfig is the part of the OCI image config the test checks.
type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		User       string            `json:"User"`
		Env        []string          `json:"Env"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// readTarball reads what docker load reads: manifest.json, then the config
// and layers it names.
func readTarball(t *testing.T, path string) *image {
	t.Helper()
	entries := readTar(t, path)
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil {
		t.Fatalf("%s: manifest.json: %v", path, err)
	}
	if len(manifest) != 1 {
		t.Fatalf("%s: %d images in manifest.json, want 1", path, len(manifest))
	}
	m := manifest[0]
	img := &image{repoTags: m.RepoTags, files: map[string]file{}}
	if err := json.Unmarshal(entries[m.Config], &img.config); err != nil {
		t.Fatalf("%s: config %s: %v", path, m.Config, err)
	}
	if len(m.Layers) != len(img.config.RootFS.DiffIDs) {
		t.Fatalf("%s: %d layers, but the config lists %d diff_ids", path, len(m.Layers), len(img.config.RootFS.DiffIDs))
	}
	for i, l := range m.Layers {
		diffID := readLayer(t, entries[l], img.files)
		// docker load refuses a layer whose content is not the config's diff_id.
		if diffID != img.config.RootFS.DiffIDs[i] {
			t.Errorf("%s: layer %s is %s, config says %s", path, l, diffID, img.config.RootFS.DiffIDs[i])
		}
	}
	return img
}

// readTar returns a plain tar's files by name.
func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return tarFiles(t, path, f, false)
}

// tarFiles reads the tar stream r, named name in failures, and returns its
// entries' contents by name; with regularOnly every entry must be a
// regular file.
func tarFiles(t *testing.T, name string, r io.Reader, regularOnly bool) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if regularOnly && h.Typeflag != tar.TypeReg {
			t.Errorf("%s: %s is not a regular file", name, h.Name)
		}
		if out[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatalf("%s: %s: %v", name, h.Name, err)
		}
	}
}

// readLayer adds a layer's entries to files and returns its diff_id, the
// sha256 of the uncompressed tar.
func readLayer(t *testing.T, blob []byte, files map[string]file) string {
	t.Helper()
	var r io.Reader = bytes.NewReader(blob)
	if bytes.HasPrefix(blob, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	sum := sha256.New()
	tr := tar.NewReader(io.TeeReader(r, sum))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = file{hdr: h, data: data}
	}
	// The tar reader stops at the end-of-archive marker; the diff_id
	// covers the padding after it too.
	if _, err := io.Copy(sum, r); err != nil {
		t.Fatal(err)
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}

func checkImage(t *testing.T, img *image, bin, arch string) {
	t.Helper()
	c := img.config
	if want := repo + "/" + bin + ":" + version; !slices.Equal(img.repoTags, []string{want}) {
		t.Errorf("%s: RepoTags %q, want [%s]", arch, img.repoTags, want)
	}
	if c.OS != "linux" || c.Architecture != arch {
		t.Errorf("%s: config says %s/%s", arch, c.OS, c.Architecture)
	}
	if !slices.Equal(c.Config.Entrypoint, []string{"/" + bin}) {
		t.Errorf("%s: Entrypoint %q, want [/%s]", arch, c.Config.Entrypoint, bin)
	}
	// The kubelet enforces runAsNonRoot from the numeric uid alone.
	if uid, _, _ := strings.Cut(c.Config.User, ":"); uid != "65532" {
		t.Errorf("%s: User %q, want uid 65532, not root", arch, c.Config.User)
	}
	if c.Config.Labels["org.opencontainers.image.version"] != version || c.Config.Labels["org.opencontainers.image.title"] != bin {
		t.Errorf("%s: labels %v lack version %s and title %s", arch, c.Config.Labels, version, bin)
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
		if _, ok := img.files[shell]; ok {
			t.Errorf("%s: /%s in the image; it needs no shell", arch, shell)
		}
	}
	if ca := img.files["etc/ssl/certs/ca-certificates.crt"]; !bytes.Contains(ca.data, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("%s: no CA bundle at /etc/ssl/certs/ca-certificates.crt", arch)
	}
	if !bytes.Contains(img.files["etc/passwd"].data, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("%s: /etc/passwd lacks nonroot 65532", arch)
	}
	if f, ok := img.files[bin]; !ok || f.hdr.Mode&0o111 == 0 {
		t.Errorf("%s: no executable /%s", arch, bin)
	}
}

// checkVersion runs the image's binary on the host with --version.
func checkVersion(t *testing.T, img *image, bin string) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), bin)
	if err := os.WriteFile(exe, img.files[bin].data, 0o755); err != nil {
		t.Fatal(err)
	}
	// A binary that ignored --version would start a controller; the
	// timeout turns that into a failure instead of a hang.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	t.Logf("%s --version: %s", bin, bytes.TrimSpace(out))
	for _, want := range []string{bin, version} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s --version printed %q, want it to contain %q", bin, out, want)
		}
	}
}

// checkLayout reads the OCI layout: one multi-platform index per binary,
// named by ref.name, pinned by <binary>.digest, with the platforms built.
func checkLayout(t *testing.T, images string, want []string) {
	t.Helper()
	oci := filepath.Join(images, "oci")
	if _, err := os.Stat(filepath.Join(oci, "oci-layout")); err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	var index ociIndex
	readJSON(t, filepath.Join(oci, "index.json"), &index)
	refs := map[string]ociDescriptor{}
	for _, d := range index.Manifests {
		refs[d.Annotations["org.opencontainers.image.ref.name"]] = d
	}
	for _, bin := range binaries {
		ref := repo + "/" + bin + ":" + version
		d, ok := refs[ref]
		if !ok {
			t.Errorf("index.json has no %s: %+v", ref, index.Manifests)
			continue
		}
		if d.MediaType != "application/vnd.oci.image.index.v1+json" {
			t.Errorf("%s is a %s, want a multi-platform index", ref, d.MediaType)
		}
		pinned, err := os.ReadFile(filepath.Join(images, bin+".digest"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(pinned)) != d.Digest {
			t.Errorf("%s.digest says %q, the layout has %s", bin, pinned, d.Digest)
		}
		var inner ociIndex
		readJSON(t, blobPath(t, oci, d.Digest), &inner)
		var platforms []string
		for _, m := range inner.Manifests {
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		}
		if !slices.Equal(platforms, want) {
			t.Errorf("%s: platforms %q, want %q", ref, platforms, want)
		}
	}
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

// blobPath is the layout's file for digest, after checking its content
// hashes to it.
func blobPath(t *testing.T, oci, digest string) string {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", digest)
	}
	p := filepath.Join(oci, "blobs", "sha256", hexDigest)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest {
		t.Fatalf("blob %s does not hash to its name", p)
	}
	return p
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
