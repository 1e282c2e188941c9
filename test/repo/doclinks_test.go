package repo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// linkRE finds inline Markdown links: [text](target). Images and links in
// code spans are handled by the caller skipping code.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks checks that every relative link in the project's Markdown
// names a file that exists and, with #anchor, a heading of that file: a
// renamed heading otherwise leaves links that quietly land at the top.
func TestDocLinks(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "config/chart/*/README.md", "config/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, rel)
		}
	}
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(text) {
			if err := checkLink(root, f, l, anchors); err != nil {
				t.Errorf("%s: link %q: %v", f, l, err)
			}
		}
	}
}

// checkLink resolves one link target of file f (relative to root).
func checkLink(root, f, target string, anchors map[string]map[string]bool) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	path, anchor, _ := strings.Cut(target, "#")
	dest := f
	if path != "" {
		dest = filepath.Join(filepath.Dir(f), path)
		if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
			return fmt.Errorf("no such file %s", dest)
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return nil
	}
	if anchors[dest] == nil {
		text, err := os.ReadFile(filepath.Join(root, dest))
		if err != nil {
			return err
		}
		anchors[dest] = headingSlugs(text)
	}
	if !anchors[dest][anchor] {
		return fmt.Errorf("%s has no heading with anchor #%s", dest, anchor)
	}
	return nil
}

// links returns the link targets of Markdown text outside fenced code
// blocks and code spans.
func links(text []byte) []string {
	var out []string
	forEachProseLine(text, func(line string) {
		for _, m := range linkRE.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, m[1])
		}
	})
	return out
}

// headingSlugs returns the anchors GitHub gives the headings of text:
// lowercased, punctuation dropped, spaces as hyphens, a repeated slug
// numbered -1, -2, ...
func headingSlugs(text []byte) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	forEachProseLine(text, func(line string) {
		trimmed := strings.TrimLeft(line, "#")
		if len(trimmed) == len(line) || !strings.HasPrefix(trimmed, " ") {
			return
		}
		s := slug(trimmed)
		if n := seen[s]; n > 0 {
			slugs[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			slugs[s] = true
		}
		seen[s]++
	})
	return slugs
}

// slug is GitHub's anchor for a heading's text.
func slug(heading string) string {
	heading = linkRE.ReplaceAllString(heading, "]") // [text](url) keeps text
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// forEachProseLine calls fn with every line outside fenced code blocks.
func forEachProseLine(text []byte, fn func(string)) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	fenced := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			fn(line)
		}
	}
}

// stripCodeSpans removes `code` spans, whose brackets are not links.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"One write per replica: the record on the pod", "one-write-per-replica-the-record-on-the-pod"},
		{"Where the replicas stand: `kubectl berth explain`", "where-the-replicas-stand-kubectl-berth-explain"},
		{"Where a burst's time goes: two saturated cores (2026-12-06)", "where-a-bursts-time-goes-two-saturated-cores-2026-12-06"},
		{"See [serving](serving.md) now", "see-serving-now"},
		{"≤ 2x, p95", "-2x-p95"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}
