package manifest

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{"documents and empty ones", "---\n# Source: x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns1}\n---\n\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ns1}\n",
			[]string{"ConfigMap ns1/a", "Namespace ns1"}, ""},
		{"no name", "apiVersion: v1\nkind: ConfigMap\n", nil, "document 0 has no apiVersion, kind or metadata.name"},
		{"not YAML", "a: [\n", nil, "decoding YAML document 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs, err := Parse([]byte(c.in))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, KeyOf(o).String())
			}
			if strings.Join(got, ";") != strings.Join(c.want, ";") {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestIndexDuplicate(t *testing.T) {
	objs, err := Parse([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Index(objs); err == nil || !strings.Contains(err.Error(), "ConfigMap a appears twice") {
		t.Errorf("error %v, want a duplicate", err)
	}
}
