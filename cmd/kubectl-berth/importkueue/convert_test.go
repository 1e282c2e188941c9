package importkueue

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// kueueExamples are Kueue's own example manifests, read from the Kueue
// module berth builds with.
var kueueExamples = []string{
	"00-resource-flavor.yaml", "01-cluster-queues.yaml", "01.5-cohorts.yaml", "02-local-queues.yaml", "07-workload-priority-classes.yaml",
}

func kueueModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("locating the Kueue module: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// convertFile decodes and converts one file, and renders the result as
// the command prints it.
func convertFile(t *testing.T, path string) (string, string) {
	t.Helper()
	d, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := &Input{}
	skipped, err := d.Decode(f, filepath.Base(path), in)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(in)
	var objs, table bytes.Buffer
	if err := WriteYAML(&objs, res.Objects); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&table, append(skipped, res.Unmapped...)); err != nil {
		t.Fatal(err)
	}
	return objs.String(), table.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s changed; got:\n%s", name, got)
	}
}

func TestImportGolden(t *testing.T) {
	examples := filepath.Join(kueueModuleDir(t), "cmd", "kueueviz", "examples")
	inputs := map[string]string{"provisioning-topology": filepath.Join("testdata", "provisioning-topology.yaml")}
	for _, e := range kueueExamples {
		inputs["kueue-"+strings.TrimSuffix(e, ".yaml")] = filepath.Join(examples, e)
	}
	for name, path := range inputs {
		t.Run(name, func(t *testing.T) {
			objs, table := convertFile(t, path)
			golden(t, name+".yaml", objs)
			golden(t, name+".txt", table)
		})
	}
}

func TestDecodeRefusesBrokenInput(t *testing.T) {
	d, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Decode(strings.NewReader("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\n---\n{not: [yaml"), "queues.yaml", &Input{})
	if err == nil || !strings.Contains(err.Error(), "queues.yaml, document 2") {
		t.Errorf("Decode = %v, want an error naming the file and document", err)
	}
}
