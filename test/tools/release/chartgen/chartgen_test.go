package chartgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }

func TestEncode(t *testing.T) {
	role := obj(map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "r", "namespace": "berth-system"},
	})
	crd := obj(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "x.berth.dev"},
		"spec":     map[string]any{"description": "a {{ template }} runs in berth-system"},
	})
	webhook := obj(map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": "w", "annotations": map[string]any{annotationsPlaceholder: ""}},
		"webhooks": []any{map[string]any{"clientConfig": map[string]any{"service": map[string]any{"name": "s", "namespace": "berth-system"}}}},
	})
	cases := []struct {
		name    string
		obj     *unstructured.Unstructured
		strict  bool
		want    []string
		wantErr string
	}{
		{"namespace templated", role, true, []string{"namespace: {{ .Release.Namespace }}\n"}, ""},
		{"template actions escaped, prose left", crd, false, []string{`a {{ "{{" }} template }} runs in berth-system`}, ""},
		{"namespace in prose is an error when strict", crd, true, nil, "appears outside a namespace field"},
		{"webhook annotations included", webhook, true, []string{"metadata:\n" + annotationsTemplate + "\n  name: w\n", "      namespace: {{ .Release.Namespace }}\n"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := encode([]*unstructured.Unstructured{c.obj}, "berth-system", c.strict)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestWriteRemovesStale: a generated file no longer produced goes; other
// files stay.
func TestWriteRemovesStale(t *testing.T) {
	chart := t.TempDir()
	dir := filepath.Join(chart, Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"crd-gone.yaml", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Write(chart, map[string][]byte{"rbac.yaml": []byte("y")}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "notes.txt,rbac.yaml" {
		t.Errorf("files %v, want notes.txt and rbac.yaml", names)
	}
}
