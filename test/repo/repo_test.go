package repo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRoot(t *testing.T) {
	dir, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "test", "repo", "repo.go")); err != nil {
		t.Errorf("Root() = %s, which does not hold this package: %v", dir, err)
	}
}

func TestIsRoot(t *testing.T) {
	for _, tc := range []struct {
		name, gomod string
		want        bool
	}{
		{name: "berth", gomod: "module " + module + "\n\ngo 1.26\n", want: true},
		{name: "a tool module", gomod: "module " + module + "/test/tools/images\n", want: false},
		{name: "another module", gomod: "module example.com/other\n", want: false},
		{name: "no go.mod", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.gomod != "" {
				if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(tc.gomod), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := isRoot(dir); got != tc.want {
				t.Errorf("isRoot(%q) = %v, want %v", tc.gomod, got, tc.want)
			}
		})
	}
}

func TestFindUp(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "test", "e2e", "install")
	tool := filepath.Join(root, "test", "tools", "images")
	for _, dir := range []string{deep, tool} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(dir, content string) {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(tool, "module "+module+"/test/tools/images\n")
	if _, err := findUp(deep); err == nil {
		t.Fatalf("findUp(%s) found a checkout where none is", deep)
	}
	write(root, "module "+module+"\n")
	for _, start := range []string{root, deep, tool} {
		got, err := findUp(start)
		if err != nil {
			t.Fatalf("findUp(%s): %v", start, err)
		}
		if got != root {
			t.Errorf("findUp(%s) = %s, want %s (a tool module's go.mod is not the checkout's)", start, got, root)
		}
	}
}
