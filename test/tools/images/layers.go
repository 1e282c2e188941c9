package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonroot is the uid and gid the images run as: distroless's nonroot, which
// Kubernetes' runAsNonRoot accepts and which owns nothing on the host.
const nonroot = 65532

// caBundlePath is where the images carry the CA bundle, the path Go's
// crypto/x509 tries first on Linux; SSL_CERT_FILE names it as well.
const caBundlePath = "etc/ssl/certs/ca-certificates.crt"

// defaultHostCABundle is where Debian, Ubuntu, Alpine, Arch and Fedora's
// ca-certificates packages put the bundle.
const defaultHostCABundle = "/etc/ssl/certs/ca-certificates.crt"

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nonroot:x:65532:
`

// entry is one file or directory of a layer.
type entry struct {
	// name is the path in the image, relative to / and without a trailing slash.
	name string
	// mode holds the permission bits, with fs.ModeSticky for /tmp.
	mode fs.FileMode
	uid  int
	gid  int
	dir  bool
	// data is a small file's content; src names a host file to copy
	// instead, so the binary is streamed rather than held in memory.
	data []byte
	src  string
}

// baseEntries are the first layer: what a static Go binary needs from an
// OS, taking the CA bundle from the host file at hostCA.
func baseEntries(hostCA string) ([]entry, error) {
	if _, err := os.Stat(hostCA); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("CA bundle %s not found: install the ca-certificates package "+
				"(apt-get install ca-certificates, apk add ca-certificates or dnf install ca-certificates) "+
				"or pass --ca-certs with a PEM bundle", hostCA)
		}
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	root := func(name string) entry { return entry{name: name, mode: 0o755, dir: true} }
	return []entry{
		root("etc"),
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		root("etc/ssl"),
		root("etc/ssl/certs"),
		{name: caBundlePath, mode: 0o644, src: hostCA},
		root("home"),
		// nonroot's home, as in /etc/passwd, so a tool that writes to $HOME
		// fails on a read-only root filesystem rather than on a missing one.
		{name: "home/nonroot", mode: 0o700, uid: nonroot, gid: nonroot, dir: true},
		// Owned by nonroot as well as world-writable: with an emptyDir
		// mounted there this changes nothing, and without one the binary
		// can still write a temporary file.
		{name: "tmp", mode: 0o777 | fs.ModeSticky, uid: nonroot, gid: nonroot, dir: true},
	}, nil
}

// binaryEntries are the second layer: the executable at /<binary>, owned by
// root so the nonroot user cannot replace it.
func binaryEntries(binary, src string) []entry {
	return []entry{{name: binary, mode: 0o755, src: src}}
}

// writeLayer writes entries as a gzipped tar at path. Entries are sorted by
// name and every timestamp is mtime, so the same entries always give the
// same bytes, and so the same digest.
func writeLayer(path string, entries []entry, mtime time.Time) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating layer: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing layer %s: %w", path, cerr)
		}
	}()
	// compress/gzip writes a zero header time and no name unless told, so
	// the compressed bytes depend only on the tar bytes. The default level:
	// best compression saves under 1% on a Go binary at three times the time.
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		return fmt.Errorf("creating gzip writer: %w", err)
	}
	tw := tar.NewWriter(zw)
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int { return cmp.Compare(a.name, b.name) })
	for _, e := range sorted {
		if err := writeEntry(tw, e, mtime.Truncate(time.Second)); err != nil {
			return fmt.Errorf("layer %s: %s: %w", filepath.Base(path), e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finishing tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("finishing gzip: %w", err)
	}
	return nil
}

// writeEntry writes one header and its content.
func writeEntry(tw *tar.Writer, e entry, mtime time.Time) error {
	h := &tar.Header{
		Name:    e.name,
		Mode:    tarMode(e.mode),
		Uid:     e.uid,
		Gid:     e.gid,
		ModTime: mtime,
		// USTAR has no access or change times; choosing it explicitly keeps
		// archive/tar from switching to PAX and recording them.
		Format: tar.FormatUSTAR,
	}
	if e.dir {
		h.Typeflag = tar.TypeDir
		h.Name += "/"
		return tw.WriteHeader(h)
	}
	h.Typeflag = tar.TypeReg
	var content io.Reader = bytes.NewReader(e.data)
	h.Size = int64(len(e.data))
	if e.src != "" {
		f, err := os.Open(e.src)
		if err != nil {
			return fmt.Errorf("opening source: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("stat source: %w", err)
		}
		content, h.Size = f, st.Size()
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := io.Copy(tw, content); err != nil {
		return fmt.Errorf("copying content: %w", err)
	}
	return nil
}

// tarMode converts permission and sticky bits to tar's mode field, where
// the sticky bit is 01000 rather than Go's fs.ModeSticky.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// layerAt writes entries to path and opens it as an OCI layer. The layer is
// compressed once, here: go-containerregistry reads the compressed file as
// is for the layout, the tarballs and the push.
func layerAt(path string, entries []entry, mtime time.Time) (v1.Layer, error) {
	if err := writeLayer(path, entries, mtime); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromFile(path, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("opening layer %s: %w", path, err)
	}
	return l, nil
}
