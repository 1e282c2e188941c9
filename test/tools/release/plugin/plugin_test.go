package plugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

const version = "v1.2.3"

// repoRoot is the berth checkout this module lives in.
const repoRoot = "../../../.."

// fakeCompile writes a stand-in binary that names its platform, so that a
// test can tell each archive's binary from the others'.
func fakeCompile(_ context.Context, o Options, p Platform, out string) error {
	return os.WriteFile(out, []byte("kubectl-berth "+o.Version+" for "+p.String()), 0o755)
}

// manifest is the part of a krew Plugin the tests read back.
type manifest struct {
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Version          string     `yaml:"version"`
		ShortDescription string     `yaml:"shortDescription"`
		Platforms        []platform `yaml:"platforms"`
	} `yaml:"spec"`
}

// TestBuild builds every default platform from the checked-in template
// with a fake compiler: the manifest lists each platform once, with the
// archive's URL and sha256, and each archive holds the binary and LICENSE.
func TestBuild(t *testing.T) {
	out := t.TempDir()
	o := Options{Source: repoRoot, Out: out, Template: filepath.Join(repoRoot, "config", "krew", "berth.yaml"),
		Version: version, Commit: "abc", Platforms: DefaultPlatforms(), Created: time.Unix(0, 0)}
	var log bytes.Buffer
	archives, err := Build(t.Context(), o, fakeCompile, &log)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, ManifestPath))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "# krew plugin manifest for kubectl-berth, rendered by berth-release plugin") {
		t.Errorf("the manifest does not start with the generated comment:\n%s", data)
	}
	var m manifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Metadata.Name != "berth" || m.Spec.Version != version || m.Spec.ShortDescription == "" {
		t.Errorf("manifest metadata %+v, spec version %q: want the template's with %s", m.Metadata, m.Spec.Version, version)
	}
	license, err := os.ReadFile(filepath.Join(repoRoot, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	byPlatform := map[Platform]platform{}
	for _, e := range m.Spec.Platforms {
		byPlatform[Platform{OS: e.Selector.MatchLabels.OS, Arch: e.Selector.MatchLabels.Arch}] = e
	}
	if len(archives) != len(DefaultPlatforms()) || len(m.Spec.Platforms) != len(DefaultPlatforms()) {
		t.Fatalf("%d archives, %d manifest platforms; want %d", len(archives), len(m.Spec.Platforms), len(DefaultPlatforms()))
	}
	for _, p := range DefaultPlatforms() {
		t.Run(p.String(), func(t *testing.T) {
			e, ok := byPlatform[p]
			if !ok {
				t.Fatalf("the manifest has no platform %s", p)
			}
			name := "kubectl-berth_" + version + "_" + p.OS + "_" + p.Arch + ".tar.gz"
			if want := "https://github.com/berth-dev/berth/releases/download/" + version + "/" + name; e.URI != want {
				t.Errorf("uri %s, want %s", e.URI, want)
			}
			raw, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(raw); e.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("sha256 %s, the archive's is %x", e.SHA256, sum)
			}
			files := untar(t, raw)
			if e.Bin != p.Bin() || len(files) != 2 {
				t.Fatalf("bin %q, files %v: want %s and LICENSE", e.Bin, slices.Collect(maps.Keys(files)), p.Bin())
			}
			if got := string(files[e.Bin]); got != "kubectl-berth "+version+" for "+p.String() {
				t.Errorf("%s holds %q, not the binary built for %s", e.Bin, got, p)
			}
			if !bytes.Equal(files["LICENSE"], license) {
				t.Error("the archive's LICENSE is not the checkout's")
			}
		})
	}
	if want := "kubectl-berth.exe"; byPlatform[Platform{"windows", "amd64"}].Bin != want {
		t.Errorf("windows bin %q, want %s", byPlatform[Platform{"windows", "amd64"}].Bin, want)
	}
}

// TestBuildIsReproducible: two builds of the same binaries give the same
// archives, so a rebuild can be checked against a release's sha256.
func TestBuildIsReproducible(t *testing.T) {
	sums := make([]string, 2)
	for i := range sums {
		o := Options{Source: repoRoot, Out: t.TempDir(), Template: filepath.Join(repoRoot, "config", "krew", "berth.yaml"),
			Version: version, Platforms: []Platform{{"linux", "amd64"}}, Created: time.Unix(1700000000, 0)}
		archives, err := Build(t.Context(), o, fakeCompile, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = archives[0].SHA256
	}
	if sums[0] != sums[1] {
		t.Errorf("sha256 %s then %s", sums[0], sums[1])
	}
}

func TestRender(t *testing.T) {
	tmpl := []byte("# the template\napiVersion: krew.googlecontainertools.github.com/v1alpha2\nkind: Plugin\nmetadata:\n  name: berth\n" +
		"spec:\n  version: v0.0.0\n  caveats: read the docs\n")
	linux := Archive{Platform: Platform{"linux", "arm64"}, SHA256: strings.Repeat("1", 64)}
	cases := []struct {
		name     string
		tmpl     string
		base     string
		archives []Archive
		want     []string // substrings of the manifest
		wantErr  string
	}{
		{name: "platforms added, the rest kept", tmpl: string(tmpl), base: "https://example.com/dl", archives: []Archive{linux},
			want: []string{"version: v9.9.9", "caveats: read the docs", "matchLabels: {os: linux, arch: arm64}",
				"uri: https://example.com/dl/kubectl-berth_v9.9.9_linux_arm64.tar.gz", `sha256: "` + strings.Repeat("1", 64) + `"`, "bin: kubectl-berth\n"}},
		{name: "not a plugin", tmpl: "apiVersion: v1\nkind: ConfigMap\nspec: {}\n", archives: []Archive{linux}, wantErr: "is not a krew.googlecontainertools.github.com/Plugin"},
		{name: "no spec", tmpl: "apiVersion: krew.googlecontainertools.github.com/v1alpha2\nkind: Plugin\n", archives: []Archive{linux}, wantErr: "no spec"},
		{name: "not YAML", tmpl: "a: [", archives: []Archive{linux}, wantErr: "parsing"},
		{name: "no archive", tmpl: string(tmpl), wantErr: "no archive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render([]byte(tc.tmpl), "v9.9.9", tc.base, tc.archives)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(got), w) {
					t.Errorf("manifest lacks %q:\n%s", w, got)
				}
			}
			if strings.Contains(string(got), "the template") {
				t.Errorf("the template's comment was kept:\n%s", got)
			}
		})
	}
}

func TestParsePlatforms(t *testing.T) {
	cases := []struct {
		in      string
		want    []Platform
		wantErr bool
	}{
		{in: "linux/amd64, windows/amd64", want: []Platform{{"linux", "amd64"}, {"windows", "amd64"}}},
		{in: "linux", wantErr: true},
		{in: "linux/amd64/v2", wantErr: true},
		{in: "linux/amd64,linux/amd64", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range cases {
		got, err := ParsePlatforms(tc.in)
		if (err != nil) != tc.wantErr || (err == nil && !slices.Equal(got, tc.want)) {
			t.Errorf("%q: %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// untar reads a gzipped tar's regular files by name.
func untar(t *testing.T, raw []byte) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = b
	}
}
