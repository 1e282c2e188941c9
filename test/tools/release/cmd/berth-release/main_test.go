package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// TestRelease runs what `make release` runs, reading the digest `make
// images` writes, then renders the packaged chart.
func TestRelease(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..", "..")
	dist := t.TempDir()
	images := filepath.Join(dist, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(images, "berth-controller.digest"), []byte(digest+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	steps := [][]string{
		{"bundle", "--config", filepath.Join(root, "config", "default"), "--version", "v2.0.0", "--images", images,
			"--image-repo", "registry.example.com/berth", "--out", filepath.Join(dist, "install.yaml")},
		{"chart", "--chart", filepath.Join(root, "config", "chart", "berth"), "--version", "v2.0.0", "--images", images,
			"--image-repo", "registry.example.com/berth", "--out", dist},
		{"render", "--chart", filepath.Join(dist, "berth-v2.0.0.tgz"), "--namespace", "gpu", "--release", "b",
			"--set", "replicas=3", "--out", filepath.Join(dist, "rendered.yaml")},
	}
	for _, args := range steps {
		if err := run(args, &out); err != nil {
			t.Fatalf("%s: %v", args[0], err)
		}
	}
	want := "image: registry.example.com/berth/berth-controller:v2.0.0@" + digest
	for _, name := range []string{"install.yaml", "rendered.yaml"} {
		data, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
	rendered, _ := os.ReadFile(filepath.Join(dist, "rendered.yaml"))
	if !strings.Contains(string(rendered), "replicas: 3") || !strings.Contains(string(rendered), "namespace: gpu") {
		t.Error("rendered.yaml ignores --set or --namespace")
	}
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		nil,
		{"publish"},
		{"bundle", "--version", "v1.0.0"},
		{"bundle", "--images"},
		{"chart", "--version", "v1.0.0", "--out", "x"},
		{"render"},
		{"render", "--chart", "x", "extra"},
		{"plugin", "--version", "v1.0.0", "--out", "x"},
		{"plugin", "--source", ".", "--version", "v1.0.0", "--out", "x", "--platforms", "linux"},
	}
	for _, args := range cases {
		if err := run(args, &bytes.Buffer{}); !errors.Is(err, errUsage) {
			t.Errorf("%q: error %v, want a usage error", args, err)
		}
	}
}

func TestReadDigest(t *testing.T) {
	dir := t.TempDir()
	if _, err := readDigest(dir); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "berth-controller.digest"), []byte("latest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readDigest(dir); err == nil {
		t.Error("accepted a digest file without sha256:")
	}
}

// TestPluginFlags: the template defaults to the checkout's, the platforms
// to every one a release ships, and the paths are made absolute, since go
// build runs in the checkout.
func TestPluginFlags(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	cases := []struct {
		name          string
		args          []string
		template      string
		platforms     int
		wantErrSubstr string
	}{
		{name: "defaults", args: []string{"--source", "src", "--version", "v1.0.0", "--out", "dist"},
			template: filepath.Join("src", "config", "krew", "berth.yaml"), platforms: 5},
		{name: "two platforms and a template", args: []string{"--source", "src", "--version", "v1.0.0", "--out", "dist",
			"--platforms", "linux/amd64,darwin/arm64", "--template", "m.yaml"}, template: "m.yaml", platforms: 2},
		{name: "not a version", args: []string{"--source", "src", "--version", "latest", "--out", "dist"}, wantErrSubstr: "semantic version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parsePluginFlags(tc.args)
			if tc.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantTemplate, _ := filepath.Abs(tc.template)
			if o.Template != wantTemplate || len(o.Platforms) != tc.platforms || !filepath.IsAbs(o.Source) || !filepath.IsAbs(o.Out) {
				t.Errorf("options %+v, want template %s and %d platforms, absolute paths", o, wantTemplate, tc.platforms)
			}
			if o.Created.Unix() != 1700000000 {
				t.Errorf("created %v, want SOURCE_DATE_EPOCH", o.Created)
			}
		})
	}
}
