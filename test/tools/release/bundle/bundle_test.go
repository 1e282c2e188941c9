package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImageName(t *testing.T) {
	cases := map[string]string{
		"ghcr.io/berth-dev/berth-controller":                      "ghcr.io/berth-dev/berth-controller",
		"ghcr.io/berth-dev/berth-controller:v1":                   "ghcr.io/berth-dev/berth-controller",
		"ghcr.io/berth-dev/berth-controller@sha256:ab":            "ghcr.io/berth-dev/berth-controller",
		"ghcr.io/berth-dev/berth-controller:v1@sha256:ab":         "ghcr.io/berth-dev/berth-controller",
		"localhost:5000/berth-controller:v1":                      "localhost:5000/berth-controller",
		"localhost:5000/berth-controller":                         "localhost:5000/berth-controller",
		"registry.example.com:443/a/b/berth-controller:v1@sha256": "registry.example.com:443/a/b/berth-controller",
	}
	for ref, want := range cases {
		if got := imageName(ref); got != want {
			t.Errorf("imageName(%q) = %q, want %q", ref, got, want)
		}
	}
}

// TestBuild: the bundle of config/default has the header, the image as
// given, and the order kubectl needs.
func TestBuild(t *testing.T) {
	const image = "registry.example.com/berth/berth-controller:v9.9.9@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	out, err := Build(Options{ConfigDir: "../../../../config/default", Image: image, Version: "v9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{"# berth v9.9.9:", "# Controller image: " + image, "kubectl apply --server-side -f install.yaml", "image: " + image} {
		if !strings.Contains(text, want) {
			t.Errorf("the bundle lacks %q", want)
		}
	}
	if strings.Contains(text, ControllerImage+":") {
		t.Error("the bundle still names the unreleased image")
	}
	ns := strings.Index(text, "kind: Namespace")
	crd := strings.Index(text, "kind: CustomResourceDefinition")
	deploy := strings.Index(text, "kind: Deployment")
	webhook := strings.Index(text, "kind: ValidatingWebhookConfiguration")
	if ns < 0 || ns > crd || crd > deploy || deploy > webhook {
		t.Errorf("order: Namespace at %d, first CRD at %d, Deployment at %d, webhooks at %d", ns, crd, deploy, webhook)
	}
}

// TestNoControllerImage: a configuration without berth's image is an
// error, not a bundle with the wrong image.
func TestNoControllerImage(t *testing.T) {
	dir := t.TempDir()
	k := "resources:\n- deploy.yaml\n"
	d := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  selector: {matchLabels: {a: b}}\n" +
		"  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers:\n      - name: c\n        image: example.com/other:v1\n"
	for name, data := range map[string]string{"kustomization.yaml": k, "deploy.yaml": d} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Build(Options{ConfigDir: dir, Image: "example.com/berth-controller:v1"})
	if err == nil || !strings.Contains(err.Error(), "no container uses "+ControllerImage) {
		t.Errorf("error %v, want one saying no container uses %s", err, ControllerImage)
	}
}
