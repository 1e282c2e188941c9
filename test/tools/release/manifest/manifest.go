// Package manifest reads multi-document Kubernetes YAML into objects: the
// common ground on which the kustomize bundle and the Helm chart are
// compared. Both are parsed into generic objects (maps, as the API server
// reads the JSON), so a comparison sees exactly what an apply would send.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Key names an object the way the API server does: kind (with its API
// group), namespace and name. Two objects with one Key in one file would
// overwrite each other on apply.
type Key struct {
	APIVersion, Kind, Namespace, Name string
}

// String is "Kind namespace/name" (or "Kind name" when cluster-scoped).
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind + " " + k.Name
	}
	return k.Kind + " " + k.Namespace + "/" + k.Name
}

// KeyOf returns the Key of o.
func KeyOf(o *unstructured.Unstructured) Key {
	return Key{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// Parse splits data into its YAML documents and decodes each into an
// object. Empty documents (only comments or whitespace, as Helm leaves for
// a template that renders nothing) are skipped; a document without a kind
// or a name is an error, because it cannot be applied.
func Parse(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading YAML document %d: %w", i, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("decoding YAML document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetKind() == "" || o.GetAPIVersion() == "" || o.GetName() == "" {
			return nil, fmt.Errorf("YAML document %d has no apiVersion, kind or metadata.name", i)
		}
		out = append(out, o)
	}
}

// Index maps each object by its Key; a Key seen twice is an error.
func Index(objs []*unstructured.Unstructured) (map[Key]*unstructured.Unstructured, error) {
	m := make(map[Key]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		k := KeyOf(o)
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%s appears twice", k)
		}
		m[k] = o
	}
	return m, nil
}

// SortedKeys returns the keys of m in a fixed order (kind, namespace,
// name, API version), for reports that read the same on every run.
func SortedKeys[V any](m map[Key]V) []Key {
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.APIVersion < b.APIVersion
	})
	return keys
}
