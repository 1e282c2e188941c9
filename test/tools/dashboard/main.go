// Command dashboard writes berth's Grafana dashboard
// (config/dashboards/berth.json), built with the Grafana Foundation SDK so
// that the panels are code, reviewed and diffed as code; `make generate`
// runs it and the checked-in JSON is what users import.
//
//	go run . -out ../../../config/dashboards/berth.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

func main() {
	out := flag.String("out", "", "file to write the dashboard to (stdout when empty)")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func write(out string) error {
	d, err := build()
	if err != nil {
		return fmt.Errorf("building the dashboard: %w", err)
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the dashboard: %w", err)
	}
	data = append(data, '\n')
	if out == "" {
		_, err = os.Stdout.Write(data)
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// datasource is the dashboard's Prometheus, chosen by the ${datasource}
// variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// queues selects the ClusterQueues the ${cluster_queue} variable picks.
const queues = `cluster_queue=~"$cluster_queue"`

// panel is one time-series panel: a title, what it shows, its unit and
// its queries (PromQL and legend).
type panel struct {
	title, description, unit string
	stacked                  bool
	queries                  [][2]string
}

// rows are the dashboard's rows and their panels, in order.
var rows = []struct {
	title  string
	panels []panel
}{
	{"Queues", []panel{
		{title: "Pending workloads", description: "Workloads waiting per ClusterQueue: active (candidates in the next cycle) and inadmissible (set aside for lack of quota, or held).",
			unit: "short", stacked: true, queries: [][2]string{
				{`sum by (cluster_queue, status) (berth_pending_workloads{` + queues + `})`, "{{cluster_queue}} {{status}}"}}},
		{title: "Admitted workloads", description: "Workloads holding quota per ClusterQueue.", unit: "short", stacked: true, queries: [][2]string{
			{`sum by (cluster_queue) (berth_admitted_active_workloads{` + queues + `})`, "{{cluster_queue}}"}}},
		{title: "Held workloads", description: "Pending workloads that can never be admitted as they are, by reason: the queue, the cluster or the job must change.",
			unit: "short", queries: [][2]string{
				{`sum by (cluster_queue, reason) (berth_held_workloads{` + queues + `})`, "{{cluster_queue}} {{reason}}"}}},
		{title: "Admissions and evictions", description: "Admissions and evictions written per minute.", unit: "short", queries: [][2]string{
			{`sum by (cluster_queue) (rate(berth_admitted_workloads_total{` + queues + `}[$__rate_interval])) * 60`, "{{cluster_queue}} admitted"},
			{`sum by (cluster_queue, reason) (rate(berth_evicted_workloads_total{` + queues + `}[$__rate_interval])) * 60`, "{{cluster_queue}} evicted: {{reason}}"}}},
	}},
	{"Time to admission", []panel{
		{title: "Time to admission, p50 and p90", description: "From a Workload's creation until its gang may start: on capacity that was there (existing), or once its booking was provisioned.",
			unit: "s", queries: [][2]string{
				{`histogram_quantile(0.5, sum by (cluster_queue, path, le) (rate(berth_admission_wait_seconds_bucket{` + queues + `}[$__rate_interval])))`, "{{cluster_queue}} {{path}} p50"},
				{`histogram_quantile(0.9, sum by (cluster_queue, path, le) (rate(berth_admission_wait_seconds_bucket{` + queues + `}[$__rate_interval])))`, "{{cluster_queue}} {{path}} p90"}}},
	}},
	{"Capacity", []panel{
		{title: "Provisioning outcomes", description: "berth's capacity bookings per minute, by ProvisioningRequest class and outcome.", unit: "short", stacked: true, queries: [][2]string{
			{`sum by (class, outcome) (rate(berth_provisioning_attempts_total[$__rate_interval])) * 60`, "{{class}} {{outcome}}"}}},
		{title: "GPUs idle while gangs wait", description: "Free capacity of a flavor, on average, while a gang of that flavor waited for capacity: in the wrong domain, or too fragmented.",
			unit: "short", queries: [][2]string{
				{`sum by (flavor, resource) (rate(berth_idle_capacity_while_waiting_seconds_total[$__rate_interval]))`, "{{flavor}} {{resource}}"}}},
		{title: "Quota held and used against nominal", description: "Quota held per ClusterQueue, flavor and resource, the part of it admitted workloads use (the rest waits on capacity bookings), and the nominal quota.",
			unit: "short", queries: [][2]string{
				{`sum by (cluster_queue, flavor, resource) (berth_cluster_queue_resource_reservation{` + queues + `})`, "{{cluster_queue}} {{flavor}} {{resource}} held"},
				{`sum by (cluster_queue, flavor, resource) (berth_cluster_queue_resource_usage{` + queues + `})`, "{{cluster_queue}} {{flavor}} {{resource}} used"},
				{`sum by (cluster_queue, flavor, resource) (berth_cluster_queue_nominal_quota{` + queues + `})`, "{{cluster_queue}} {{flavor}} {{resource}} nominal"}}},
		{title: "Weighted share", description: "Each ClusterQueue's dominant share of what it borrows from its cohort, divided by its weight: what fair sharing orders queues by.",
			unit: "percentunit", queries: [][2]string{
				{`max by (cluster_queue, cohort) (berth_cluster_queue_weighted_share{` + queues + `})`, "{{cohort}}/{{cluster_queue}}"}}},
		{title: "Warm headroom", description: "HeadroomPolicies' headroom per ClusterQueue and domain, in replicas: kept (what the sizing keeps), available (what fits now on Ready headroom nodes; below kept while the autoscaler restores it), and taken per hour (replicas that started on it).",
			unit: "short", queries: [][2]string{
				{`sum by (cluster_queue, domain) (berth_headroom_replicas{state="kept",` + queues + `})`, "{{cluster_queue}} {{domain}} kept"},
				{`sum by (cluster_queue, domain) (berth_headroom_replicas{state="available",` + queues + `})`, "{{cluster_queue}} {{domain}} available"},
				{`sum by (cluster_queue, domain) (increase(berth_headroom_taken_replicas_total{` + queues + `}[1h]))`, "{{cluster_queue}} {{domain}} taken per hour"}}},
	}},
	{"Controller", []panel{
		{title: "Admission cycle, p99", description: "Time the engine took to decide one cycle, without its writes.", unit: "s", queries: [][2]string{
			{`histogram_quantile(0.99, sum by (le) (rate(berth_admission_cycle_duration_seconds_bucket[$__rate_interval])))`, "p99"}}},
		{title: "Writes per admission", description: "Pending-reason writes and rolled-back admissions per admission written: what berth costs the API server beyond one write per workload.",
			unit: "short", queries: [][2]string{
				{`sum(rate(berth_pending_status_writes_total[$__rate_interval])) / sum(rate(berth_admissions_total{result="admitted"}[$__rate_interval]))`, "pending-reason writes"},
				{`sum(rate(berth_admissions_total{result="rolled_back"}[$__rate_interval])) / sum(rate(berth_admissions_total{result="admitted"}[$__rate_interval]))`, "rolled back"}}},
	}},
}

// build is the dashboard, in the classic JSON model: every Grafana in use
// imports it, while the SDK's preferred v2 schema needs Grafana 12 with
// its new dashboard API enabled.
//
//nolint:staticcheck // the classic model on purpose, see above
func build() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("berth").
		Uid("berth-queues").
		Description("berth's queues: what waits and why, what is admitted, how long admission takes, what capacity bookings do, and GPUs idle while gangs wait. Generated by test/tools/dashboard.").
		Tags([]string{"berth", "batch", "gpu"}).
		Refresh("30s").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("cluster_queue").Label("ClusterQueue").
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(berth_cluster_queue_status, cluster_queue)")}).
			Datasource(datasource).Multi(true).IncludeAll(true).Refresh(dashboard.VariableRefreshOnTimeRangeChanged))
	// Panels are numbered in order, so that links to one stay stable while
	// panels are added at the end.
	id := uint32(0)
	for _, r := range rows {
		id++
		b = b.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		for _, p := range r.panels {
			id++
			b = b.WithPanel(p.builder().Id(id))
		}
	}
	return b.Build()
}

func (p panel) builder() *timeseries.PanelBuilder {
	b := timeseries.NewPanelBuilder().Title(p.title).Description(p.description).Unit(p.unit).Datasource(datasource).
		Height(8).Span(12).Min(0)
	if p.stacked {
		b = b.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))
	}
	for _, q := range p.queries {
		b = b.WithTarget(prometheus.NewDataqueryBuilder().Datasource(datasource).Expr(q[0]).LegendFormat(q[1]))
	}
	return b
}
