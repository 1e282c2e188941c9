package plugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"time"
)

// entry is one file of an archive.
type entry struct {
	name string
	mode int64
	data []byte
}

// pack writes entries, in order, into a gzipped tar at the archive's root,
// where the manifest's bin points. Owners, times and the gzip header are
// fixed, so the sha256 depends on the files alone.
func pack(entries []entry, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Size: int64(len(e.data)),
			ModTime: created, Format: tar.FormatUSTAR, Uname: "root", Gname: "root"}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing the header of %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("closing the gzip stream: %w", err)
	}
	return buf.Bytes(), nil
}
