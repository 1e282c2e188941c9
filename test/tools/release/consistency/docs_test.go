package consistency

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// readmeValue is a row of the values table in the chart's README.md.
var readmeValue = regexp.MustCompile("(?m)^\\| `([a-zA-Z0-9.]+)` \\|")

// TestValuesAreDocumented: every row of README.md's values table is a
// value of values.yaml with a comment of its own, and every value of
// values.yaml is in the table (itself or the map it belongs to, such as
// resources).
func TestValuesAreDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]*yaml.Node{}
	var leaves []string
	walkValues(doc.Content[0], "", keys, &leaves)
	_, table, ok := strings.Cut(string(readme), "\n## Values\n")
	if !ok {
		t.Fatal("README.md has no section ## Values")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	documented := map[string]bool{}
	for _, m := range readmeValue.FindAllStringSubmatch(table, -1) {
		path := m[1]
		documented[path] = true
		key, ok := keys[path]
		if !ok {
			t.Errorf("README.md lists %s, which values.yaml does not have", path)
			continue
		}
		if strings.TrimSpace(key.HeadComment+key.LineComment) == "" {
			t.Errorf("values.yaml: %s has no comment", path)
		}
	}
	for _, leaf := range leaves {
		covered := false
		for p := leaf; p != ""; p = parent(p) {
			covered = covered || documented[p]
		}
		if !covered {
			t.Errorf("values.yaml: %s is not in README.md's values table", leaf)
		}
	}
}

// walkValues records the key node of every value under path and the
// leaves: scalars, lists and empty maps.
func walkValues(n *yaml.Node, path string, keys map[string]*yaml.Node, leaves *[]string) {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		*leaves = append(*leaves, path)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		p := n.Content[i].Value
		if path != "" {
			p = path + "." + p
		}
		keys[p] = n.Content[i]
		walkValues(n.Content[i+1], p, keys, leaves)
	}
}

func parent(path string) string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i]
	}
	return ""
}

// TestAlertsAreDocumented: every alert of the PrometheusRule is in
// README.md's table of alerts, and the table has no other.
func TestAlertsAreDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(Berth[A-Za-z]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		listed[m[1]] = true
	}
	rule := one(t, render(t, "berth-system", nil, "metrics.prometheusRule.enabled=true"), "PrometheusRule", "berth-controller")
	rendered := map[string]bool{}
	for _, name := range alerts(rule.Object) {
		rendered[name] = true
		if !listed[name] {
			t.Errorf("alert %s is not in README.md", name)
		}
	}
	for a := range listed {
		if !rendered[a] {
			t.Errorf("README.md lists alert %s, which the chart does not render", a)
		}
	}
}

// alerts are the names of the alerts in a PrometheusRule.
func alerts(obj map[string]any) []string {
	var names []string
	spec, _ := obj["spec"].(map[string]any)
	groups, _ := spec["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			if name, ok := r.(map[string]any)["alert"].(string); ok {
				names = append(names, name)
			}
		}
	}
	return names
}
