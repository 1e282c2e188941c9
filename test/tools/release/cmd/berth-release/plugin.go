package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/test/tools/release/chart"
	"github.com/berth-dev/berth/test/tools/release/plugin"
)

// defaultPlatforms is --platforms' default: every platform a release ships.
func defaultPlatforms() string {
	names := make([]string, 0, len(plugin.DefaultPlatforms()))
	for _, p := range plugin.DefaultPlatforms() {
		names = append(names, p.String())
	}
	return strings.Join(names, ",")
}

// parsePluginFlags reads the plugin subcommand's flags into build options.
func parsePluginFlags(args []string) (plugin.Options, error) {
	fs := flag.NewFlagSet("plugin", flag.ContinueOnError)
	var o plugin.Options
	var platforms string
	fs.StringVar(&o.Source, "source", "", "the berth checkout to build ./cmd/kubectl-berth from")
	fs.StringVar(&o.Template, "template", "", "krew manifest template; default SOURCE/config/krew/berth.yaml")
	fs.StringVar(&o.Version, "version", "", "the release, vX.Y.Z: the manifest's version and the binary's")
	fs.StringVar(&o.Commit, "commit", "", "source revision (default: git rev-parse HEAD, -dirty when the tree has changes)")
	fs.StringVar(&o.BaseURL, "base-url", "", "URL the archives are downloaded from, without their names (default https://github.com/berth-dev/berth/releases/download/VERSION/)")
	fs.StringVar(&platforms, "platforms", defaultPlatforms(), "comma-separated os/arch list")
	fs.StringVar(&o.Out, "out", "", "directory to write the archives into, and the manifest into as "+plugin.ManifestPath)
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	if err := required(fs, "source", "version", "out"); err != nil {
		return o, err
	}
	if err := (chart.Release{Version: o.Version}).Validate(); err != nil {
		return o, err
	}
	var err error
	if o.Platforms, err = plugin.ParsePlatforms(platforms); err != nil {
		return o, fmt.Errorf("%w: plugin: --platforms: %w", errUsage, err)
	}
	if o.Template == "" {
		o.Template = filepath.Join(o.Source, "config", "krew", "berth.yaml")
	}
	if o.Created, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		return o, err
	}
	// go build runs in the checkout: the other paths must not depend on
	// where berth-release runs.
	for _, p := range []*string{&o.Source, &o.Out, &o.Template} {
		if *p, err = filepath.Abs(*p); err != nil {
			return o, fmt.Errorf("resolving %s: %w", *p, err)
		}
	}
	return o, nil
}

func runPlugin(args []string, out io.Writer) error {
	o, err := parsePluginFlags(args)
	if err != nil {
		return err
	}
	// An interrupt stops the go build under way rather than orphaning it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if o.Commit == "" {
		o.Commit = plugin.ResolveCommit(ctx, o.Source)
	}
	start := time.Now()
	if _, err := plugin.Build(ctx, o, plugin.GoBuild, out); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "built kubectl-berth %s (commit %s) in %s\n", o.Version, o.Commit, time.Since(start).Round(time.Second))
	return err
}

// sourceDateEpoch is the reproducible-builds timestamp
// (https://reproducible-builds.org/specs/source-date-epoch/): the given
// seconds, or the Unix epoch when unset.
func sourceDateEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want non-negative seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}
