// Package chart prepares, packages and renders berth's Helm chart with the
// Helm SDK (helm.sh/helm/v3): what `helm package` and `helm template` do,
// with the release's version and image digest set on the way.
package chart

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// Release says what a released chart pins.
type Release struct {
	// Version is the chart's version and appVersion (so the image tag):
	// the release, e.g. v1.2.3. It must be a semantic version.
	Version string
	// ImageDigest is the controller image's digest, sha256:<hex>; empty
	// leaves the chart pulling by tag.
	ImageDigest string
	// ImageRepository, when set, replaces image.repository.
	ImageRepository string
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// The values a release sets, each on one line of values.yaml under
	// image:. They are edited in the text, not through a YAML round trip,
	// because the file's comments are the chart's documentation and Helm
	// packages the file as it is.
	valueLine = func(key string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^  ` + key + `: .*$`)
	}
)

// Validate says what is wrong with r.
func (r Release) Validate() error {
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(r.Version, "v")); err != nil {
		return fmt.Errorf("version %q is not a semantic version (vX.Y.Z[-pre]): %w", r.Version, err)
	}
	if r.ImageDigest != "" && !digestRE.MatchString(r.ImageDigest) {
		return fmt.Errorf("image digest %q is not sha256:<64 hex digits>", r.ImageDigest)
	}
	return nil
}

// Load reads a chart from a directory or a packaged .tgz.
func Load(path string) (*chart.Chart, error) {
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", path, err)
	}
	return ch, nil
}

// Apply sets r on ch: version, appVersion and the image values, in the
// parsed values and in the values.yaml that gets packaged.
func Apply(ch *chart.Chart, r Release) error {
	if err := r.Validate(); err != nil {
		return err
	}
	ch.Metadata.Version = r.Version
	ch.Metadata.AppVersion = r.Version
	image, ok := ch.Values["image"].(map[string]any)
	if !ok {
		return errors.New("values.yaml has no image map")
	}
	set := map[string]string{}
	if r.ImageDigest != "" {
		set["digest"] = r.ImageDigest
	}
	if r.ImageRepository != "" {
		set["repository"] = r.ImageRepository
	}
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		for key, value := range set {
			re := valueLine(key)
			if n := len(re.FindAllIndex(f.Data, -1)); n != 1 {
				return fmt.Errorf("values.yaml: want one line %q under image:, found %d", "  "+key+": ...", n)
			}
			f.Data = re.ReplaceAll(f.Data, []byte("  "+key+": "+value))
			image[key] = value
		}
	}
	return nil
}

// Package loads the chart in dir, applies r and writes
// <outDir>/berth-<version>.tgz, returning its path. The packaged chart is
// loaded back and rendered with its defaults, so a release never ships a
// chart that does not render.
func Package(dir, outDir string, r Release) (string, error) {
	ch, err := Load(dir)
	if err != nil {
		return "", err
	}
	if err := Apply(ch, r); err != nil {
		return "", err
	}
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("chart %s: %w", dir, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", outDir, err)
	}
	path, err := chartutil.Save(ch, outDir)
	if err != nil {
		return "", fmt.Errorf("packaging %s: %w", dir, err)
	}
	if _, err := Render(RenderOptions{Chart: path, Namespace: "berth-system", ReleaseName: "berth"}); err != nil {
		return "", fmt.Errorf("the packaged chart %s does not render: %w", path, err)
	}
	return path, nil
}
