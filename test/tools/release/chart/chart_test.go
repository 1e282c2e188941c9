package chart

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

const (
	chartDir = "../../../../config/chart/berth"
	digest   = "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
)

func TestReleaseValidate(t *testing.T) {
	cases := []struct {
		r       Release
		wantErr string
	}{
		{Release{Version: "v1.2.3", ImageDigest: digest}, ""},
		{Release{Version: "v0.0.0-dev"}, ""},
		{Release{Version: "1.2.3-rc.1+build.5"}, ""},
		{Release{Version: "latest"}, "not a semantic version"},
		{Release{Version: "v1.2"}, "not a semantic version"},
		{Release{Version: "v1.2.3", ImageDigest: "sha256:short"}, "not sha256:<64 hex digits>"},
		{Release{Version: "v1.2.3", ImageDigest: "v1.2.3"}, "not sha256:<64 hex digits>"},
	}
	for _, c := range cases {
		err := c.r.Validate()
		if (c.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%+v: error %v, want %q", c.r, err, c.wantErr)
		}
	}
}

// TestPackage: the packaged chart carries the release in Chart.yaml, in
// its values and in the values.yaml it ships, with that file's comments.
func TestPackage(t *testing.T) {
	out := t.TempDir()
	path, err := Package(chartDir, out, Release{Version: "v1.2.3", ImageDigest: digest, ImageRepository: "mirror.example.com/berth-controller"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, "berth-v1.2.3.tgz"); path != want {
		t.Errorf("packaged to %s, want %s", path, want)
	}
	ch, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "v1.2.3" || ch.Metadata.AppVersion != "v1.2.3" {
		t.Errorf("version %s, appVersion %s", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	image := ch.Values["image"].(map[string]any)
	if image["digest"] != digest || image["repository"] != "mirror.example.com/berth-controller" {
		t.Errorf("image values %v", image)
	}
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		text := string(f.Data)
		if !strings.Contains(text, "  digest: "+digest+"\n") || !strings.Contains(text, "# Digest, sha256:") {
			t.Errorf("values.yaml lost the digest or its comments:\n%s", text[:400])
		}
	}
	manifest, err := Render(RenderOptions{Chart: path, Namespace: "ns", ReleaseName: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "image: mirror.example.com/berth-controller:v1.2.3@" + digest; !strings.Contains(string(manifest), want) {
		t.Errorf("the render lacks %q", want)
	}
}

// TestRenderOrder: Namespace, then CRDs, then the rest, as in install.yaml.
func TestRenderOrder(t *testing.T) {
	out, err := Render(RenderOptions{Chart: chartDir, Namespace: "ns", ReleaseName: "r", Set: []string{"namespace.create=true"}})
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	ns, crd, pdb := strings.Index(text, "\nkind: Namespace\n"), strings.Index(text, "\nkind: CustomResourceDefinition\n"), strings.Index(text, "\nkind: PodDisruptionBudget\n")
	if ns < 0 || ns > crd || crd > pdb {
		t.Errorf("order: Namespace at %d, first CRD at %d, PodDisruptionBudget at %d", ns, crd, pdb)
	}
}
