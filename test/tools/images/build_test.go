package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func TestParsePlatforms(t *testing.T) {
	cases := []struct {
		in      string
		want    []v1.Platform
		wantErr bool
	}{
		{in: "linux/amd64,linux/arm64", want: []v1.Platform{amd64, arm64}},
		{in: " linux/arm64 ", want: []v1.Platform{arm64}},
		{in: "darwin/arm64", wantErr: true},
		{in: "linux/arm64/v8", wantErr: true},
		{in: "linux/amd64,linux/amd64", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parsePlatforms(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if !got[i].Equals(c.want[i]) {
					t.Errorf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestSourceDateEpoch(t *testing.T) {
	cases := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "", want: time.Unix(0, 0)},
		{in: "1700000000", want: time.Unix(1700000000, 0)},
		{in: "-1", wantErr: true},
		{in: "yesterday", wantErr: true},
	}
	for _, c := range cases {
		got, err := sourceDateEpoch(c.in)
		if (err != nil) != c.wantErr || !got.Equal(c.want) {
			t.Errorf("sourceDateEpoch(%q) = %s, %v; want %s, error %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestResolveCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the commit stamp comes from git, which is not installed")
	}
	ctx := context.Background()
	dir := t.TempDir()
	if got := resolveCommit(ctx, dir); got != "unknown" {
		t.Errorf("outside a repository: %q, want unknown", got)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f")
	git("commit", "-q", "-m", "one")
	sha := git("rev-parse", "HEAD")
	if got := resolveCommit(ctx, dir); got != sha {
		t.Errorf("clean tree: %q, want %q", got, sha)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := resolveCommit(ctx, dir); got != sha+"-dirty" {
		t.Errorf("dirty tree: %q, want %q", got, sha+"-dirty")
	}
}

// fakeCompile stands in for go build: its "binary" depends on exactly what
// a real one would, so digests behave as with real builds.
func fakeCompile(_ context.Context, o buildOptions, binary string, p v1.Platform, out string) error {
	return os.WriteFile(out, fmt.Appendf(nil, "%s %s %s %s", binary, p, o.version, o.commit), 0o755)
}

func testOptions(t *testing.T) buildOptions {
	return buildOptions{
		source: t.TempDir(), out: t.TempDir(), version: "v1.2.3", repo: "registry.example/berth-dev",
		commit: "abc123", caCerts: fakeCA(t), platforms: []v1.Platform{amd64, arm64}, created: time.Unix(0, 0).UTC(),
	}
}

func readDigests(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, bin := range binaries {
		b, err := os.ReadFile(filepath.Join(out, bin+".digest"))
		if err != nil {
			t.Fatal(err)
		}
		got[bin] = string(b)
	}
	return got
}

// TestBuildOutputs checks what build writes and that a second build of the
// same inputs, into another directory, writes the same digests.
func TestBuildOutputs(t *testing.T) {
	o := testOptions(t)
	var summary strings.Builder
	if err := build(context.Background(), o, fakeCompile, &summary); err != nil {
		t.Fatal(err)
	}
	digests := readDigests(t, o.out)
	lp, err := layout.FromPath(filepath.Join(o.out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range binaries {
		d, err := findIndex(im, bin, o.version)
		if err != nil {
			t.Fatal(err)
		}
		if want := "registry.example/berth-dev/" + bin + ":v1.2.3"; d.Annotations[keyRefName] != want {
			t.Errorf("%s ref.name %q, want %q", bin, d.Annotations[keyRefName], want)
		}
		if d.Digest.String()+"\n" != digests[bin] {
			t.Errorf("%s: layout has %s, %s.digest says %q", bin, d.Digest, bin, digests[bin])
		}
		if !strings.Contains(summary.String(), "registry.example/berth-dev/"+bin+":v1.2.3@"+d.Digest.String()) {
			t.Errorf("summary lacks the pinned reference of %s:\n%s", bin, summary.String())
		}
		for _, arch := range []string{"amd64", "arm64"} {
			checkTarballTags(t, filepath.Join(o.out, bin+"-v1.2.3-linux-"+arch+".tar"), "registry.example/berth-dev/"+bin+":v1.2.3")
		}
	}
	again := o
	again.out = t.TempDir()
	if err := build(context.Background(), again, fakeCompile, io.Discard); err != nil {
		t.Fatal(err)
	}
	for bin, d := range readDigests(t, again.out) {
		if d != digests[bin] {
			t.Errorf("%s: second build %q, first %q", bin, d, digests[bin])
		}
	}
}

// TestBuildRebuildReplacesLayout: building into the same --out twice leaves
// one entry per binary, not two.
func TestBuildRebuildReplacesLayout(t *testing.T) {
	o := testOptions(t)
	for range 2 {
		if err := build(context.Background(), o, fakeCompile, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(o.out, "oci", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(raw, &im); err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(binaries) {
		t.Errorf("index.json lists %d manifests, want %d", len(im.Manifests), len(binaries))
	}
}

// checkTarballTags checks the docker tarball names its image as want, which
// is what docker load and kind load image-archive tag it with.
func checkTarballTags(t *testing.T, path, want string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no manifest.json: %v", path, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != want {
			t.Errorf("%s: manifest.json %+v, want the one tag %s", path, m, want)
		}
		return
	}
}

func TestBuildFailsWithoutCA(t *testing.T) {
	o := testOptions(t)
	o.caCerts = filepath.Join(t.TempDir(), "absent")
	err := build(context.Background(), o, fakeCompile, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ca-certificates") {
		t.Fatalf("err = %v, want the missing CA bundle", err)
	}
}

func TestBuildReportsCompileFailure(t *testing.T) {
	broken := errors.New("compiler broke")
	fail := func(context.Context, buildOptions, string, v1.Platform, string) error { return broken }
	if err := build(context.Background(), testOptions(t), fail, io.Discard); !errors.Is(err, broken) {
		t.Fatalf("err = %v, want %v", err, broken)
	}
}

// TestGoBuildStampsVersion runs the real go build on a minimal stand-in for
// the berth module, for the host platform only to keep it quick, and checks
// the version and commit reach the binary through -ldflags -X.
func TestGoBuildStampsVersion(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"go.mod": "module github.com/berth-dev/berth\n\ngo 1.26.0\n",
		"cmd/internal/buildinfo/buildinfo.go": "package buildinfo\n\nvar version, commit = \"devel\", \"\"\n\n" +
			"// String is the version line.\nfunc String() string { return version + \" \" + commit }\n",
		"cmd/berth-controller/main.go": "package main\n\nimport \"github.com/berth-dev/berth/cmd/internal/buildinfo\"\n\n" +
			"func main() { println(buildinfo.String()) }\n",
	}
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := buildOptions{source: src, version: "v9.8.7", commit: "feedbeef"}
	exe := filepath.Join(t.TempDir(), "berth-controller")
	host := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	if err := goBuild(context.Background(), o, "berth-controller", host, exe); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe).CombinedOutput()
	if err != nil {
		t.Fatalf("running the binary: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "v9.8.7 feedbeef" {
		t.Errorf("binary says %q, want %q", got, "v9.8.7 feedbeef")
	}
}
