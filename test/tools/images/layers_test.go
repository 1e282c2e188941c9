package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tarFile is one entry read back from a layer.
type tarFile struct {
	hdr  *tar.Header
	body string
}

// readLayer returns a gzipped tar's entries in archive order.
func readLayer(t *testing.T, path string) []tarFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []tarFile
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarFile{hdr: h, body: string(b)})
	}
}

// fakeCA writes a stand-in CA bundle and returns its path.
func fakeCA(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBaseLayer(t *testing.T) {
	entries, err := baseEntries(fakeCA(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "base.tar.gz")
	mtime := time.Unix(1700000000, 0)
	if err := writeLayer(path, entries, mtime); err != nil {
		t.Fatal(err)
	}
	got := map[string]tarFile{}
	for _, f := range readLayer(t, path) {
		got[f.hdr.Name] = f
	}
	cases := []struct {
		name     string
		typ      byte
		mode     int64
		uid, gid int
		contains []string
	}{
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "etc/passwd", typ: tar.TypeReg, mode: 0o644,
			contains: []string{"root:x:0:0:", "nonroot:x:65532:65532:nonroot:/home/nonroot:"}},
		{name: "etc/group", typ: tar.TypeReg, mode: 0o644, contains: []string{"root:x:0:", "nonroot:x:65532:"}},
		{name: "etc/ssl/certs/ca-certificates.crt", typ: tar.TypeReg, mode: 0o644, contains: []string{"BEGIN CERTIFICATE"}},
		{name: "home/nonroot/", typ: tar.TypeDir, mode: 0o700, uid: nonroot, gid: nonroot},
		{name: "tmp/", typ: tar.TypeDir, mode: 0o1777, uid: nonroot, gid: nonroot},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, ok := got[c.name]
			if !ok {
				t.Fatalf("%s missing from the layer", c.name)
			}
			h := f.hdr
			if h.Typeflag != c.typ || h.Mode != c.mode || h.Uid != c.uid || h.Gid != c.gid {
				t.Errorf("type %q mode %o uid %d gid %d, want type %q mode %o uid %d gid %d",
					h.Typeflag, h.Mode, h.Uid, h.Gid, c.typ, c.mode, c.uid, c.gid)
			}
			if !h.ModTime.Equal(mtime) {
				t.Errorf("mtime %s, want %s", h.ModTime, mtime)
			}
			for _, s := range c.contains {
				if !strings.Contains(f.body, s) {
					t.Errorf("content %q lacks %q", f.body, s)
				}
			}
		})
	}
	if f, ok := got["tmp/"]; ok && f.hdr.FileInfo().Mode()&fs.ModeSticky == 0 {
		t.Error("/tmp lacks the sticky bit")
	}
}

func TestBaseEntriesMissingCA(t *testing.T) {
	_, err := baseEntries(filepath.Join(t.TempDir(), "absent.crt"))
	if err == nil || !strings.Contains(err.Error(), "install the ca-certificates package") {
		t.Fatalf("err = %v, want one saying what to install", err)
	}
}

func TestBinaryLayer(t *testing.T) {
	src := filepath.Join(t.TempDir(), "exe")
	if err := os.WriteFile(src, []byte("\x7fELF fake"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bin.tar.gz")
	if err := writeLayer(path, binaryEntries("berth-controller", src), time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	files := readLayer(t, path)
	if len(files) != 1 {
		t.Fatalf("%d entries, want 1", len(files))
	}
	h := files[0].hdr
	// The source file's 0600 must not leak: the image needs it executable.
	if h.Name != "berth-controller" || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || files[0].body != "\x7fELF fake" {
		t.Errorf("got %s mode %o uid %d gid %d body %q", h.Name, h.Mode, h.Uid, h.Gid, files[0].body)
	}
}

// TestWriteLayerDeterministic: the bytes depend on the entries and mtime
// only, not on their order or the source files' own timestamps.
func TestWriteLayerDeterministic(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	entries := []entry{
		{name: "b", mode: 0o644, data: []byte("b")},
		{name: "a", mode: 0o755, dir: true},
		{name: "a/c", mode: 0o644, src: src},
	}
	write := func(name string, es []entry, mtime time.Time) []byte {
		p := filepath.Join(dir, name)
		if err := writeLayer(p, es, mtime); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	epoch := time.Unix(0, 0)
	first := write("1", entries, epoch)
	if err := os.Chtimes(src, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(entries)
	slices.Reverse(reversed)
	if second := write("2", reversed, epoch); !bytes.Equal(first, second) {
		t.Error("same entries in another order, or a touched source, gave different bytes")
	}
	if later := write("3", entries, epoch.Add(time.Hour)); bytes.Equal(first, later) {
		t.Error("a different mtime gave the same bytes: the mtime is not recorded")
	}
	var names []string
	for _, f := range readLayer(t, filepath.Join(dir, "1")) {
		names = append(names, f.hdr.Name)
	}
	if want := []string{"a/", "a/c", "b"}; !slices.Equal(names, want) {
		t.Errorf("entries %q, want sorted %q", names, want)
	}
}

func TestTarMode(t *testing.T) {
	cases := []struct {
		in   fs.FileMode
		want int64
	}{
		{0o644, 0o644},
		{0o755, 0o755},
		{0o777 | fs.ModeSticky, 0o1777},
		{0o755 | fs.ModeDir, 0o755},
	}
	for _, c := range cases {
		if got := tarMode(c.in); got != c.want {
			t.Errorf("tarMode(%v) = %o, want %o", c.in, got, c.want)
		}
	}
}
