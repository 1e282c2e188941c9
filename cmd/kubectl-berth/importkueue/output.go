package importkueue

import (
	"fmt"
	"io"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// WriteYAML writes the objects as a YAML stream, ready for kubectl apply.
func WriteYAML(w io.Writer, objs []client.Object) error {
	for i, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", o.GetName(), err)
		}
		// A new object has no status and no creation time.
		delete(u, "status")
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		pruneEmpty(u)
		data, err := yaml.Marshal(u)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", o.GetName(), err)
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable writes what was not mapped as a table: KIND, NAME, FIELD,
// WHY.
func WriteTable(w io.Writer, unmapped []Unmapped) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tFIELD\tWHY")
	for _, u := range unmapped {
		field := u.Field
		if field == "" {
			field = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Kind, u.Name, field, u.Reason)
	}
	return tw.Flush()
}

// pruneEmpty removes the fields whose value is an empty object (unset
// structs), but not an empty label selector: {} selects everything.
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		sub, ok := v.(map[string]any)
		if !ok {
			continue
		}
		pruneEmpty(sub)
		if len(sub) == 0 && k != "namespaceSelector" {
			delete(m, k)
		}
	}
}
