package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-dev/berth/cmd/internal/sim/plot"
)

// WriteTable prints the report as tables: one row per policy for the
// cluster-wide measures, then the times to start per class, then the
// tenants' shares.
func (rep Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d jobs\n", rep.Jobs)
	if l := rep.LeftOut; l.Jobs > 0 {
		fmt.Fprintf(tw, "%d jobs left out: they can never fit the modelled cluster (the largest, %s, asks for %d pods and %d GPUs)\n",
			l.Jobs, l.Largest, l.LargestPods, l.LargestGPUs)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "POLICY\tEND\tSTARTED\tNEVER\tGAVE UP\tEVICTIONS\tGPU-H BUSY\tGPU-H PARTIAL\tGPU-H IDLE WHILE WAITING\tNODE-H\tSCALE-UPS\tUSED BY ITS JOB / BY ANOTHER / NEVER (HALF GANG)\tSLO MET")
	for _, r := range rep.Results {
		slo := "-"
		if r.SLO.Jobs > 0 {
			slo = fmt.Sprintf("%.1f%% (%d/%d)", 100*r.SLO.Attainment, r.SLO.Met, r.SLO.Jobs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d / %d / %d (%d)\t%s\n", r.Policy,
			time.Duration(r.End).Round(time.Minute), r.Started, r.NeverStarted, r.GaveUp,
			r.Evictions, r.GPUHours.Busy, r.GPUHours.Partial, r.GPUHours.IdleWhileWaiting, r.NodeHours,
			r.ScaleUps.Total, r.ScaleUps.UsedByJob, r.ScaleUps.UsedByOther, r.ScaleUps.NeverUsed, r.ScaleUps.HalfGang, slo)
	}
	fmt.Fprintln(tw, "\nPOLICY\tCLASS\tSTARTED\tP50\tP95\tP99")
	for _, r := range rep.Results {
		for _, s := range r.StartTimes {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Policy, s.Class, s.Jobs, short(s.P50), short(s.P95), short(s.P99))
		}
	}
	if len(rep.Results) > 0 && len(rep.Results[0].SLO.Classes) > 0 {
		fmt.Fprintln(tw, "\nPOLICY\tCLASS\tSLO MET")
		for _, r := range rep.Results {
			for _, c := range r.SLO.Classes {
				fmt.Fprintf(tw, "%s\t%s\t%.1f%% (%d/%d)\n", r.Policy, c.Class, 100*c.Attainment, c.Met, c.Jobs)
			}
		}
	}
	fmt.Fprintln(tw, "\nPOLICY\tCLUSTERQUEUE\tWEIGHT\tSHARE OF GPUS HELD\tWEIGHT'S SHARE")
	for _, r := range rep.Results {
		held, entitled := r.sharePercents()
		for i, t := range r.Tenants {
			fmt.Fprintf(tw, "%s\t%s\t%g\t%.1f%%\t%.1f%%\n", r.Policy, t.ClusterQueue, t.Weight, held[i], entitled[i])
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// sharePercents are the tenants' mean and entitled shares in percent, in
// Tenants order, rounded so that each column sums to 100.0 — the same
// numbers the share figure's legend shows (plot.Percents).
func (r PolicyResult) sharePercents() (held, entitled []float64) {
	for _, t := range r.Tenants {
		held, entitled = append(held, t.MeanShare), append(entitled, t.EntitledShare)
	}
	return plot.Percents(held), plot.Percents(entitled)
}

// short formats a duration to the second.
func short(d Duration) string { return time.Duration(d).Round(time.Second).String() }

// WriteJSON writes the report as indented JSON.
func (rep Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("writing the report as JSON: %w", err)
	}
	return nil
}

// WritePlots writes the report's figures into dir, in format (svg or
// png): utilization.<format> (GPUs busy, idle and held by partial gangs
// over time, one panel per policy), utilization-burst.<format> (the same
// zoomed onto the busiest short stretch, when a burst would be lost on the
// full time axis; plot.BurstWindow), start-cdf.<format> (the distribution of
// times to start) and share-<policy>.<format> (each ClusterQueue's share of
// the GPUs held, against its weight). It returns the files written.
func (rep Report) WritePlots(dir, format string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	var written []string
	write := func(name string, draw func(io.Writer) error) error {
		path := filepath.Join(dir, name+"."+format)
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("creating %s: %w", path, err)
		}
		if err := draw(f); err != nil {
			f.Close()
			return fmt.Errorf("drawing %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		written = append(written, path)
		return nil
	}
	usages := make([]plot.Usage, 0, len(rep.Results))
	starts := map[string][]time.Duration{}
	for _, r := range rep.Results {
		usages = append(usages, r.Usage)
		for _, d := range r.starts {
			starts[r.Policy] = append(starts[r.Policy], d...)
		}
	}
	if err := write("utilization", func(w io.Writer) error {
		return plot.Utilization(w, format, "GPUs over time", usages)
	}); err != nil {
		return written, err
	}
	if win, ok := plot.BurstWindow(usages); ok {
		title := fmt.Sprintf("GPUs over time, the busiest stretch (%s to %s)", short(Duration(win.From)), short(Duration(win.To)))
		if err := write("utilization-burst", func(w io.Writer) error {
			return plot.UtilizationIn(w, format, title, usages, win)
		}); err != nil {
			return written, err
		}
	}
	if len(starts) > 0 {
		if err := write("start-cdf", func(w io.Writer) error {
			return plot.StartCDF(w, format, "Time from submission to the whole gang running", starts)
		}); err != nil {
			return written, err
		}
	}
	for _, r := range rep.Results {
		if len(r.shares) == 0 {
			continue
		}
		summary := map[string]plot.ShareSummary{}
		for _, t := range r.Tenants {
			summary[t.ClusterQueue] = plot.ShareSummary{Mean: t.MeanShare, Entitled: t.EntitledShare}
		}
		if err := write("share-"+strings.ReplaceAll(r.Policy, "/", "-"), func(w io.Writer) error {
			return plot.Share(w, format, "Share of the GPUs held: "+r.Policy, r.shares, summary)
		}); err != nil {
			return written, err
		}
	}
	return written, nil
}
