package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResolveCommit(t *testing.T) {
	cases := []struct {
		name, stamped string
		vcs           vcs
		want          string
	}{
		{"linker value wins", "abc123", vcs{revision: "def456", modified: true}, "abc123"},
		{"clean tree", "", vcs{revision: "def456"}, "def456"},
		{"dirty tree", "", vcs{revision: "def456", modified: true}, "def456-dirty"},
		{"nothing recorded", "", vcs{}, "unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := resolveCommit(c.stamped, c.vcs); got != c.want {
				t.Errorf("resolveCommit(%q, %+v) = %q, want %q", c.stamped, c.vcs, got, c.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	i := Info{Version: "v1.2.3", Commit: "abc", GoVersion: "go1.26.8", Platform: "linux/arm64"}
	if got, want := i.String("berth-controller"), "berth-controller v1.2.3 (commit abc, go1.26.8, linux/arm64)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Get().Collector())
	want := `# HELP berth_build_info The build of berth that is running: version, commit and Go version as labels; always 1.
# TYPE berth_build_info gauge
berth_build_info{commit="` + Get().Commit + `",goversion="` + runtime.Version() + `",version="devel"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "berth_build_info"); err != nil {
		t.Error(err)
	}
}
