package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
)

// imageInputs are everything an image is made from.
type imageInputs struct {
	meta   buildMeta
	ca     string
	binary string
}

func defaultInputs() imageInputs {
	return imageInputs{
		meta:   buildMeta{binary: "berth-controller", version: "v1.2.3", commit: "abc123", created: time.Unix(0, 0).UTC()},
		ca:     "ca",
		binary: "binary",
	}
}

// makeIndex builds the two-platform index from in, in a fresh directory.
func makeIndex(t *testing.T, in imageInputs) (v1.ImageIndex, []platformImage) {
	t.Helper()
	dir := t.TempDir()
	ca, exe := filepath.Join(dir, "ca"), filepath.Join(dir, "exe")
	if err := os.WriteFile(ca, []byte(in.ca), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte(in.binary), 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := baseEntries(ca)
	if err != nil {
		t.Fatal(err)
	}
	base, err := layerAt(filepath.Join(dir, "base.tar.gz"), entries, in.meta.created)
	if err != nil {
		t.Fatal(err)
	}
	var imgs []platformImage
	for _, p := range []v1.Platform{amd64, arm64} {
		bin, err := layerAt(filepath.Join(dir, p.Architecture+".tar.gz"), binaryEntries(in.meta.binary, exe), in.meta.created)
		if err != nil {
			t.Fatal(err)
		}
		img, err := newImage(in.meta, p, base, bin)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, platformImage{platform: p, image: img})
	}
	return newIndex(in.meta, imgs), imgs
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestImageConfig(t *testing.T) {
	in := defaultInputs()
	_, imgs := makeIndex(t, in)
	for _, pi := range imgs {
		cf, err := pi.image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if cf.OS != "linux" || cf.Architecture != pi.platform.Architecture {
			t.Errorf("platform %s/%s, want %s", cf.OS, cf.Architecture, pi.platform)
		}
		if !slices.Equal(c.Entrypoint, []string{"/berth-controller"}) || c.User != "65532:65532" || c.WorkingDir != "/" {
			t.Errorf("entrypoint %q user %q workdir %q", c.Entrypoint, c.User, c.WorkingDir)
		}
		if want := []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}; !slices.Equal(c.Env, want) {
			t.Errorf("env %q, want %q", c.Env, want)
		}
		wantLabels := map[string]string{
			keySource: sourceURL, keyVersion: "v1.2.3", keyRevision: "abc123",
			keyTitle: "berth-controller", keyLicenses: "Apache-2.0",
		}
		for k, v := range wantLabels {
			if c.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
			}
		}
		if len(cf.RootFS.DiffIDs) != 2 || len(cf.History) != 2 {
			t.Errorf("%d layers and %d history entries, want 2 and 2", len(cf.RootFS.DiffIDs), len(cf.History))
		}
		m, err := pi.image.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || m.Layers[1].MediaType != types.OCILayer {
			t.Errorf("media types %s, %s, %s: want OCI throughout", m.MediaType, m.Config.MediaType, m.Layers[1].MediaType)
		}
	}
}

func TestIndex(t *testing.T) {
	idx, _ := makeIndex(t, defaultInputs())
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("index %s with %d manifests, want an OCI index of 2", im.MediaType, len(im.Manifests))
	}
	for i, want := range []v1.Platform{amd64, arm64} {
		if p := im.Manifests[i].Platform; p == nil || !p.Equals(want) {
			t.Errorf("manifest %d platform %v, want %s", i, p, want)
		}
	}
	if im.Annotations[keySource] != sourceURL || im.Annotations[keyVersion] != "v1.2.3" {
		t.Errorf("index annotations %v lack source and version", im.Annotations)
	}
}

// TestDigestDeterministic: the same inputs give the same index digest, built
// in different directories at different times; any changed input changes it.
func TestDigestDeterministic(t *testing.T) {
	ref := digest(t, mustIndex(t, defaultInputs()))
	cases := []struct {
		name   string
		change func(*imageInputs)
		same   bool
	}{
		{"same inputs", func(*imageInputs) {}, true},
		{"other binary content", func(in *imageInputs) { in.binary = "other" }, false},
		{"other CA bundle", func(in *imageInputs) { in.ca = "other" }, false},
		{"other version", func(in *imageInputs) { in.meta.version = "v1.2.4" }, false},
		{"other commit", func(in *imageInputs) { in.meta.commit = "def456" }, false},
		{"other SOURCE_DATE_EPOCH", func(in *imageInputs) { in.meta.created = time.Unix(1, 0).UTC() }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := defaultInputs()
			c.change(&in)
			got := digest(t, mustIndex(t, in))
			if (got == ref) != c.same {
				t.Errorf("digest %s vs %s: same = %v, want %v", got, ref, got == ref, c.same)
			}
		})
	}
}

func mustIndex(t *testing.T, in imageInputs) v1.ImageIndex {
	idx, _ := makeIndex(t, in)
	return idx
}
