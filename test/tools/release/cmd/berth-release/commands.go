package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/berth-dev/berth/test/tools/release/bundle"
	"github.com/berth-dev/berth/test/tools/release/chart"
	"github.com/berth-dev/berth/test/tools/release/chartgen"
)

// defaultImageRepo is where released images are pushed unless --image-repo
// says otherwise (IMAGE_REPO in the Makefile).
const defaultImageRepo = "ghcr.io/berth-dev"

func runBundle(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bundle", flag.ContinueOnError)
	var o bundle.Options
	var images, repo, path string
	fs.StringVar(&o.ConfigDir, "config", "config/default", "kustomization directory to build")
	fs.StringVar(&o.Version, "version", "", "the release, vX.Y.Z (image tag and header)")
	fs.StringVar(&o.Image, "image", "", "controller image reference, REPO/berth-controller:V@sha256:...; default from --images")
	fs.StringVar(&o.Namespace, "namespace", "", "install into this namespace instead of config's")
	fs.StringVar(&images, "images", "", "directory with berth-controller.digest (make images), read when --image is not given")
	fs.StringVar(&repo, "image-repo", defaultImageRepo, "image repository with --images")
	fs.StringVar(&path, "out", "", "file to write (default standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := required(fs, "version"); err != nil {
		return err
	}
	if err := (chart.Release{Version: o.Version}).Validate(); err != nil {
		return err
	}
	if o.Image == "" {
		if images == "" {
			return fmt.Errorf("%w: bundle: --image or --images is required", errUsage)
		}
		digest, err := readDigest(images)
		if err != nil {
			return err
		}
		o.Image = fmt.Sprintf("%s/berth-controller:%s@%s", strings.TrimSuffix(repo, "/"), o.Version, digest)
	}
	// A release pins what it runs: a tag can be moved, a digest cannot.
	if !strings.Contains(o.Image, "@sha256:") {
		return fmt.Errorf("bundle: --image %s has no digest (@sha256:...)", o.Image)
	}
	data, err := bundle.Build(o)
	if err != nil {
		return err
	}
	if err := writeOutput(path, data, out); err != nil {
		return err
	}
	if path != "" && path != "-" {
		fmt.Fprintf(out, "wrote %s (berth %s, %s)\n", path, o.Version, o.Image)
	}
	return nil
}

func runChart(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	var r chart.Release
	var dir, images, outDir string
	fs.StringVar(&dir, "chart", "config/chart/berth", "chart source directory")
	fs.StringVar(&r.Version, "version", "", "the release, vX.Y.Z: chart version and appVersion")
	fs.StringVar(&r.ImageDigest, "image-digest", "", "controller image digest, sha256:...; default from --images")
	fs.StringVar(&r.ImageRepository, "image-repo", "", "image repository (REPO, the chart adds /berth-controller); default the chart's")
	fs.StringVar(&images, "images", "", "directory with berth-controller.digest (make images), read when --image-digest is not given")
	fs.StringVar(&outDir, "out", "", "directory to write berth-<version>.tgz into")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := required(fs, "version", "out"); err != nil {
		return err
	}
	if r.ImageDigest == "" {
		if images == "" {
			return fmt.Errorf("%w: chart: --image-digest or --images is required", errUsage)
		}
		d, err := readDigest(images)
		if err != nil {
			return err
		}
		r.ImageDigest = d
	}
	if r.ImageRepository != "" {
		r.ImageRepository = strings.TrimSuffix(r.ImageRepository, "/") + "/berth-controller"
	}
	path, err := chart.Package(dir, outDir, r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "wrote %s (chart %s, image digest %s)\n", path, r.Version, r.ImageDigest)
	return err
}

func runRender(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	var o chart.RenderOptions
	var files, sets, apis multiFlag
	var path string
	fs.StringVar(&o.Chart, "chart", "", "chart directory or packaged .tgz")
	fs.StringVar(&o.Namespace, "namespace", "berth-system", "release namespace")
	fs.StringVar(&o.ReleaseName, "release", "berth", "release name")
	fs.Var(&files, "f", "values file (repeatable)")
	fs.Var(&files, "values", "values file (repeatable)")
	fs.Var(&sets, "set", "key=value, as helm --set (repeatable)")
	fs.Var(&apis, "api-versions", "another API version the cluster serves (repeatable)")
	fs.StringVar(&path, "out", "", "file to write (default standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := required(fs, "chart"); err != nil {
		return err
	}
	o.ValueFiles, o.Set, o.ExtraAPIVersions = files, sets, apis
	data, err := chart.Render(o)
	if err != nil {
		return err
	}
	return writeOutput(path, data, out)
}

func runGenerate(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	var config, dir, namespace string
	fs.StringVar(&config, "config", "config/default", "kustomization directory the chart follows")
	fs.StringVar(&dir, "chart", "config/chart/berth", "chart directory")
	fs.StringVar(&namespace, "config-namespace", "berth-system", "the namespace config puts berth in; it becomes the release namespace")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	files, err := chartgen.Files(config, namespace)
	if err != nil {
		return err
	}
	if err := chartgen.Write(dir, files); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "wrote %d templates to %s/%s\n", len(files), dir, chartgen.Dir)
	return err
}
