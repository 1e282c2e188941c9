package consistency

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/berth-dev/berth/test/tools/release/bundle"
	"github.com/berth-dev/berth/test/tools/release/chart"
	"github.com/berth-dev/berth/test/tools/release/manifest"
)

// What the tests release: a version and an image digest as `make release`
// would pass them.
const (
	testVersion = "v1.2.3"
	testDigest  = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	testImage   = bundle.ControllerImage + ":" + testVersion + "@" + testDigest
)

// repoRoot is the berth checkout this module sits in (test/tools/release).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "default", "kustomization.yaml")); err != nil {
		t.Fatalf("not a berth checkout: %v", err)
	}
	return root
}

func configDir(t testing.TB) string { return filepath.Join(repoRoot(t), "config", "default") }
func chartDir(t testing.TB) string  { return filepath.Join(repoRoot(t), "config", "chart", "berth") }

// tempDirs are directories the test binary made for what it shares
// between tests (the packaged chart, berth-controller); TestMain removes
// them.
var (
	tempMu   sync.Mutex
	tempDirs []string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// sharedTempDir makes a directory that lives as long as the test binary.
func sharedTempDir() (string, error) {
	dir, err := os.MkdirTemp("", "berth-release-test-")
	if err != nil {
		return "", err
	}
	tempMu.Lock()
	defer tempMu.Unlock()
	tempDirs = append(tempDirs, dir)
	return dir, nil
}

var (
	releasedOnce sync.Once
	releasedPath string
	releasedErr  error
)

// releasedChart is the chart as `berth-release chart` packages it for
// testVersion and testDigest, packaged once per test binary.
func releasedChart(t testing.TB) string {
	t.Helper()
	releasedOnce.Do(func() {
		dir, err := sharedTempDir()
		if err != nil {
			releasedErr = err
			return
		}
		releasedPath, releasedErr = chart.Package(chartDir(t), dir, chart.Release{Version: testVersion, ImageDigest: testDigest})
	})
	if releasedErr != nil {
		t.Fatalf("packaging the chart: %v", releasedErr)
	}
	return releasedPath
}

// render renders the released chart into namespace with values (a nil map
// for the defaults) and --set style sets.
func render(t testing.TB, namespace string, values map[string]any, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := renderErr(namespace, releasedChart(t), values, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func renderErr(namespace, path string, values map[string]any, sets ...string) ([]*unstructured.Unstructured, error) {
	data, err := chart.Render(chart.RenderOptions{Chart: path, Namespace: namespace, ReleaseName: "berth", Values: values, Set: sets})
	if err != nil {
		return nil, err
	}
	return manifest.Parse(data)
}

// build builds the bundle from dir (config/default or an overlay of it)
// with image (testImage if empty), into namespace ("" keeps config's).
func build(t testing.TB, dir, namespace, image string) []*unstructured.Unstructured {
	t.Helper()
	if image == "" {
		image = testImage
	}
	data, err := bundle.Build(bundle.Options{ConfigDir: dir, Namespace: namespace, Image: image, Version: testVersion})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// overlay writes a kustomization over config/default with the given extra
// fields (YAML) and returns its directory.
func overlay(t testing.TB, extra string) string {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, configDir(t))
	if err != nil {
		t.Fatal(err)
	}
	k := "resources:\n- " + filepath.ToSlash(rel) + "\n" + extra
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// index maps objs by key, failing on duplicates.
func index(t testing.TB, objs []*unstructured.Unstructured) map[manifest.Key]*unstructured.Unstructured {
	t.Helper()
	m, err := manifest.Index(objs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// diff reports every object only on one side and every field that
// differs, in a fixed order.
func diff(bundleObjs, chartObjs map[manifest.Key]*unstructured.Unstructured) []string {
	var out []string
	for _, k := range manifest.SortedKeys(bundleObjs) {
		c, ok := chartObjs[k]
		if !ok {
			out = append(out, k.String()+": only in the bundle")
			continue
		}
		if d := cmp.Diff(bundleObjs[k].Object, c.Object); d != "" {
			out = append(out, k.String()+" (-bundle +chart):\n"+d)
		}
	}
	for _, k := range manifest.SortedKeys(chartObjs) {
		if _, ok := bundleObjs[k]; !ok {
			out = append(out, k.String()+": only in the chart")
		}
	}
	return out
}

// find returns the objects of kind, optionally only the one named name.
func find(objs []*unstructured.Unstructured, kind, name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			out = append(out, o)
		}
	}
	return out
}

// one returns the single object of kind named name, failing otherwise.
func one(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	found := find(objs, kind, name)
	if len(found) != 1 {
		t.Fatalf("want one %s %s, found %d", kind, name, len(found))
	}
	return found[0]
}

// typed converts u into a typed object (into).
func typed[T any](t testing.TB, u *unstructured.Unstructured, into *T) *T {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("converting %s: %v", manifest.KeyOf(u), err)
	}
	return into
}

// controller is the berth-controller Deployment in objs.
func controller(t testing.TB, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	return typed(t, one(t, objs, "Deployment", "berth-controller"), &appsv1.Deployment{})
}

// manager is the controller's one container.
func manager(t testing.TB, objs []*unstructured.Unstructured) corev1.Container {
	t.Helper()
	d := controller(t, objs)
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("want one container, found %d", n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// hasArg says whether args hold arg exactly, or (for a name ending in
// "=") any value of that flag.
func hasArg(args []string, arg string) bool {
	for _, a := range args {
		if a == arg || (strings.HasSuffix(arg, "=") && strings.HasPrefix(a, arg)) {
			return true
		}
	}
	return false
}
