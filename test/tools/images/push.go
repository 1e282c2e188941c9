package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushOptions are the push subcommand's inputs.
type pushOptions struct {
	// oci is the layout `build` wrote (its --out plus /oci).
	oci     string
	repo    string
	version string
}

func parsePushFlags(args []string) (pushOptions, error) {
	var o pushOptions
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.StringVar(&o.oci, "oci", "", "the OCI layout written by build")
	fs.StringVar(&o.repo, "repo", "", "image repository prefix to push to, e.g. ghcr.io/berth-dev")
	fs.StringVar(&o.version, "version", "", "the tag; must be the version the layout was built with")
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	return o, required(fs, "oci", "repo", "version")
}

// push uploads each binary's index from the layout to repo/<binary>:version,
// authenticating as docker and crane do (~/.docker/config.json and its
// credential helpers).
func push(ctx context.Context, o pushOptions, w io.Writer) error {
	lp, err := layout.FromPath(o.oci)
	if err != nil {
		return fmt.Errorf("opening the OCI layout %s: %w", o.oci, err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return fmt.Errorf("reading %s/index.json: %w", o.oci, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return fmt.Errorf("reading %s/index.json: %w", o.oci, err)
	}
	for _, bin := range binaries {
		desc, err := findIndex(im, bin, o.version)
		if err != nil {
			return fmt.Errorf("%s: %w", o.oci, err)
		}
		idx, err := ii.ImageIndex(desc.Digest)
		if err != nil {
			return fmt.Errorf("reading %s's index %s: %w", bin, desc.Digest, err)
		}
		ref := o.repo + "/" + bin + ":" + o.version
		tag, err := name.NewTag(ref, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("image reference %s: %w", ref, err)
		}
		err = remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		if _, err := fmt.Fprintf(w, "pushed %s@%s\n", ref, desc.Digest); err != nil {
			return err
		}
	}
	return nil
}

// findIndex is the layout's entry for bin, found by the repository's last
// path element in its ref.name so that a layout built for one registry can
// be pushed to another. Its tag must be version: the binaries and labels
// inside carry the version they were built with, and a different tag would
// misname them.
func findIndex(im *v1.IndexManifest, bin, version string) (v1.Descriptor, error) {
	for _, d := range im.Manifests {
		ref, ok := d.Annotations[keyRefName]
		if !ok {
			continue
		}
		tag, err := name.NewTag(ref)
		if err != nil || path.Base(tag.RepositoryStr()) != bin {
			continue
		}
		if tag.TagStr() != version {
			return v1.Descriptor{}, fmt.Errorf("%s was built as %s, not --version %s", bin, ref, version)
		}
		if !d.MediaType.IsIndex() {
			return v1.Descriptor{}, fmt.Errorf("%s is a %s, not an image index", ref, d.MediaType)
		}
		return d, nil
	}
	return v1.Descriptor{}, fmt.Errorf("no image of %s (no %s annotation naming it)", bin, keyRefName)
}
