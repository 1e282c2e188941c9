package consistency

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/test/tools/release/chartgen"
)

// TestGeneratedTemplatesAreCurrent: the chart's generated templates are
// what `make generate` writes from config/default now (make
// verify-generated checks the same in CI; this says it sooner).
func TestGeneratedTemplatesAreCurrent(t *testing.T) {
	want, err := chartgen.Files(configDir(t), "berth-system")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(chartDir(t), chartgen.Dir)
	on, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(on) != len(want) {
		t.Errorf("%s holds %d files, make generate writes %d", dir, len(on), len(want))
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != string(data) {
			t.Errorf("%s is stale or missing: run make generate", name)
		}
	}
}
