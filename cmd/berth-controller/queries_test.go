package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/cmd/internal/buildinfo"
	"github.com/berth-dev/berth/controllers/metrics"
)

// exported are the names of every series berth-controller exports itself
// (a histogram's _bucket, _sum and _count go by its name).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	// The registry holds what main registers: berth_build_info and every
	// collector of metrics.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(buildinfo.Get().Collector()); err != nil {
		t.Fatal(err)
	}
	if err := metrics.New().Register(reg); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 100)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

// TestDashboardAndAlertsQueryExportedSeries: every berth_ series the
// Grafana dashboard and the chart's PrometheusRule query is one
// berth-controller exports, so that neither shows nothing or never fires
// because a name changed.
func TestDashboardAndAlertsQueryExportedSeries(t *testing.T) {
	names := exported(t)
	series := regexp.MustCompile(`berth_[a-z_]+`)
	for _, file := range []string{"config/dashboards/berth.json", "config/chart/berth/templates/prometheusrule.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, s := range series.FindAllString(string(data), -1) {
			found++
			name := s
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(s, suffix); ok && names[base] {
					name = base
				}
			}
			if !names[name] {
				t.Errorf("%s queries %s, which berth-controller does not export", file, s)
			}
		}
		if found == 0 {
			t.Errorf("%s queries no berth_ series", file)
		}
	}
}

// TestExportedCatchesAMissingSeries: the check above would see a renamed
// series.
func TestExportedCatchesAMissingSeries(t *testing.T) {
	names := exported(t)
	for _, want := range []string{"berth_build_info", "berth_pending_workloads", "berth_admission_wait_seconds", "berth_cluster_queue_status"} {
		if !names[want] {
			t.Errorf("%s is not among the exported series %v", want, names)
		}
	}
	if names["berth_pending_workload"] {
		t.Error("a name berth does not export is found")
	}
}
