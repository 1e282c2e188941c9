package main

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI annotation and label keys
// (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
const (
	keySource   = "org.opencontainers.image.source"
	keyVersion  = "org.opencontainers.image.version"
	keyRevision = "org.opencontainers.image.revision"
	keyTitle    = "org.opencontainers.image.title"
	keyLicenses = "org.opencontainers.image.licenses"
	keyRefName  = "org.opencontainers.image.ref.name"
)

const (
	sourceURL = "https://github.com/berth-dev/berth"
	// license is the SPDX identifier of the repository's LICENSE file.
	license = "Apache-2.0"
)

// buildMeta describes the binary an image carries and the build it came from.
type buildMeta struct {
	binary  string
	version string
	commit  string
	// created is every timestamp in the image: layers, history, config.
	created time.Time
}

// labels are the OCI labels of the image config and the annotations of the
// multi-platform index: registries such as GHCR link a package to its
// repository from the index's org.opencontainers.image.source.
func (m buildMeta) labels() map[string]string {
	return map[string]string{
		keySource:   sourceURL,
		keyVersion:  m.version,
		keyRevision: m.commit,
		keyTitle:    m.binary,
		keyLicenses: license,
	}
}

// newImage assembles one platform's image from the shared base layer and
// the binary's layer, in OCI media types throughout.
func newImage(m buildMeta, p v1.Platform, base, bin v1.Layer) (v1.Image, error) {
	created := v1.Time{Time: m.created}
	cfg := &v1.ConfigFile{
		Created:      created,
		OS:           p.OS,
		Architecture: p.Architecture,
		Variant:      p.Variant,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: []string{"/" + m.binary},
			// Numeric, so the kubelet can check runAsNonRoot without
			// reading /etc/passwd from the image.
			User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
			WorkingDir: "/",
			Env:        []string{"PATH=/", "SSL_CERT_FILE=/" + caBundlePath},
			Labels:     m.labels(),
		},
	}
	start := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(start, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s %s: setting config: %w", m.binary, p, err)
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created,
			CreatedBy: "berth-images: CA certificates, /etc/passwd, /etc/group, /tmp"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: created,
			CreatedBy: fmt.Sprintf("berth-images: /%s %s (%s)", m.binary, m.version, m.commit)}},
	)
	if err != nil {
		return nil, fmt.Errorf("%s %s: adding layers: %w", m.binary, p, err)
	}
	return img, nil
}

// platformImage is one platform's image of a binary.
type platformImage struct {
	platform v1.Platform
	image    v1.Image
}

// newIndex is the multi-platform index over imgs, in their order, so the
// index digest depends only on the images and the --platforms order.
func newIndex(m buildMeta, imgs []platformImage) v1.ImageIndex {
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for _, pi := range imgs {
		p := pi.platform
		adds = append(adds, mutate.IndexAddendum{Add: pi.image, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	// Annotations on a v1.ImageIndex returns a v1.ImageIndex.
	return mutate.Annotations(idx, m.labels()).(v1.ImageIndex)
}
