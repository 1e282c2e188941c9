package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/test/scale"
)

// pluginPlatforms are the platforms TestPlugin builds: each is a full
// compile, so not all five a release ships. At full scale (`make
// test-long`) linux/amd64 and linux/arm64, which shares most of its
// compiled packages with the arm64 images; in `make test` the host's
// alone. Windows's differently named binary and manifests of several
// platforms are checked by the plugin package's own tests.
var pluginPlatforms = scale.Pick([]string{runtime.GOOS + "/" + runtime.GOARCH}, []string{"linux/amd64", "linux/arm64"})

// krewManifest is the part of a krew Plugin manifest the test reads.
type krewManifest struct {
	Kind string `json:"kind"`
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestPlugin runs `make plugin` and reads what it wrote as krew would:
// the manifest lists every platform built, each archive's sha256 is the
// file's, each archive holds the binary the manifest names and the
// LICENSE, and the linux/amd64 binary (on such a host) prints the release
// version.
func TestPlugin(t *testing.T) {
	dist := t.TempDir()
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), "make", "-C", repoRoot(t), "plugin", "DIST="+dist, "VERSION="+version,
		"PLUGIN_PLATFORMS="+strings.Join(pluginPlatforms, ","))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make plugin: %v\n%s", err, out)
	}
	t.Logf("make plugin took %s:\n%s", time.Since(start).Round(time.Second), out)
	raw, err := os.ReadFile(filepath.Join(dist, "krew", "berth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m krewManifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("krew/berth.yaml: %v", err)
	}
	if m.Kind != "Plugin" || m.Spec.Version != version || len(m.Spec.Platforms) != len(pluginPlatforms) {
		t.Fatalf("manifest kind %s, version %s, %d platforms; want a Plugin of %s for %v", m.Kind, m.Spec.Version, len(m.Spec.Platforms), version, pluginPlatforms)
	}
	for i, p := range m.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		t.Run(goos+"/"+arch, func(t *testing.T) {
			if goos+"/"+arch != pluginPlatforms[i] {
				t.Fatalf("platform %d selects %s/%s, want %s", i, goos, arch, pluginPlatforms[i])
			}
			name := "kubectl-berth_" + version + "_" + goos + "_" + arch + ".tar.gz"
			if want := "https://github.com/berth-dev/berth/releases/download/" + version + "/" + name; p.URI != want {
				t.Errorf("uri %s, want %s", p.URI, want)
			}
			archive, err := os.ReadFile(filepath.Join(dist, path.Base(p.URI)))
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(archive); hex.EncodeToString(sum[:]) != p.SHA256 {
				t.Errorf("the manifest's sha256 %s is not the archive's %x", p.SHA256, sum)
			}
			files := readTarGz(t, archive)
			if len(files["LICENSE"]) == 0 || len(files[p.Bin]) == 0 {
				t.Fatalf("the archive holds %d files, want bin %q and LICENSE", len(files), p.Bin)
			}
			// Only the linux/amd64 binary is run, and only on such a host.
			if host := runtime.GOOS + "/" + runtime.GOARCH; goos+"/"+arch != "linux/amd64" || host != "linux/amd64" {
				return
			}
			checkPluginVersion(t, files[p.Bin])
		})
	}
}

// checkPluginVersion runs the plugin binary on the host: `kubectl-berth
// version` must print the release's version.
func checkPluginVersion(t *testing.T, exe []byte) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-berth")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl-berth version: %v\n%s", err, out)
	}
	t.Logf("kubectl-berth version: %s", bytes.TrimSpace(out))
	if want := "kubectl-berth " + version + " (commit "; !strings.HasPrefix(string(out), want) {
		t.Errorf("kubectl-berth version printed %q, want it to start with %q", out, want)
	}
}

// readTarGz returns a gzipped tar's regular files by name.
func readTarGz(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return tarFiles(t, "archive", zr, true)
}
