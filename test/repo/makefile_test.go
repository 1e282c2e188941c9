package repo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReliabilitySuitesRun checks that every test package under
// test/reliability is in the Makefile's RELIABILITY_PACKAGES: the list is
// written out (to run the suites in a chosen order), so a new suite left
// out of it would silently not run in make test.
func TestReliabilitySuitesRun(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(string(makefile), "\n") {
		if rest, ok := strings.CutPrefix(line, "RELIABILITY_PACKAGES = "); ok {
			listed = strings.Fields(rest)
		}
	}
	if len(listed) == 0 {
		t.Fatal("the Makefile has no RELIABILITY_PACKAGES line")
	}
	var missing []string
	err = filepath.WalkDir(filepath.Join(root, "test", "reliability"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := "./" + filepath.ToSlash(rel) + "/"
		if !slices.Contains(listed, pkg) && !slices.Contains(missing, pkg) {
			missing = append(missing, pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("test packages not in the Makefile's RELIABILITY_PACKAGES, so make test would not run them: %v", missing)
	}
}
