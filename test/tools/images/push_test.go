package main

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushRoundTrip pushes a build to an in-process registry, pulls each
// index back and checks it is the one <binary>.digest pins, with both
// platforms and the binary's labels.
func TestPushRoundTrip(t *testing.T) {
	// No credentials from the developer's ~/.docker reach the test.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/berth-dev"

	o := testOptions(t)
	if err := build(context.Background(), o, fakeCompile, io.Discard); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	po := pushOptions{oci: filepath.Join(o.out, "oci"), repo: repo, version: o.version}
	if err := push(context.Background(), po, &out); err != nil {
		t.Fatal(err)
	}
	digests := readDigests(t, o.out)
	for _, bin := range binaries {
		ref := repo + "/" + bin + ":" + o.version
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(tag)
		if err != nil {
			t.Fatalf("pulling %s: %v", ref, err)
		}
		if got := digest(t, idx).String() + "\n"; got != digests[bin] {
			t.Errorf("%s: registry has %q, %s.digest says %q", bin, got, bin, digests[bin])
		}
		if !strings.Contains(out.String(), "pushed "+ref+"@") {
			t.Errorf("push output lacks %s:\n%s", ref, out.String())
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 2 {
			t.Fatalf("%s: %d platforms, want 2", ref, len(im.Manifests))
		}
		// Pulling an image by digest checks every blob arrived, not only
		// the manifests.
		img, err := idx.Image(im.Manifests[1].Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != "arm64" || cf.Config.Labels[keyTitle] != bin {
			t.Errorf("%s: second image is %s titled %q, want arm64 titled %s", ref, cf.Architecture, cf.Config.Labels[keyTitle], bin)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				t.Fatalf("%s: reading a layer back: %v", ref, err)
			}
			rc.Close()
		}
	}
}

func TestPushRefusesOtherVersion(t *testing.T) {
	o := testOptions(t)
	if err := build(context.Background(), o, fakeCompile, io.Discard); err != nil {
		t.Fatal(err)
	}
	po := pushOptions{oci: filepath.Join(o.out, "oci"), repo: "127.0.0.1:1/berth-dev", version: "v9.9.9"}
	err := push(context.Background(), po, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not --version v9.9.9") {
		t.Fatalf("err = %v, want a refusal to tag a v1.2.3 build as v9.9.9", err)
	}
}
