package repo

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// sharedModules are the tool modules whose builds share compiled packages
// with the berth module's: kube-apiserver and the other Kubernetes
// binaries, kwok, the JobSet and LeaderWorkerSet operators, the release
// tooling and the image builder compile k8s.io/api, client-go,
// controller-runtime and the rest from the same module versions, with the same
// flags (the Makefile's CGO_ENABLED=0 and -trimpath), so on empty caches
// each such package is compiled once. One differing version of a module
// that those packages import — golang.org/x/net, say — gives every package
// above it a new build ID, and make test compiles the tree twice.
var sharedModules = []string{
	"test/tools/kube", "test/tools/kwok", "test/tools/jobset", "test/tools/lws",
	"test/tools/release", "test/tools/images",
}

// TestToolModulesShareVersions checks that every module the berth module
// and a shared tool module both require has the same version in both.
func TestToolModulesShareVersions(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	main := versions(t, filepath.Join(root, "go.mod"))
	for _, dir := range sharedModules {
		for path, v := range versions(t, filepath.Join(root, dir, "go.mod")) {
			if mv, ok := main[path]; ok && mv != v {
				t.Errorf("%s requires %s %s, the berth module %s: make both the newer one (go get %s@<version> in the older), "+
					"or make test compiles the dependency tree twice (docs/development.md)", dir, path, v, mv, path)
			}
		}
	}
}

// versions reads a go.mod's requirements, with replacements applied.
func versions(t *testing.T, gomod string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(gomod, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range f.Require {
		out[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if r.New.Version != "" {
			out[r.Old.Path] = r.New.Version
		}
	}
	return out
}
