package commands

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// run runs kubectl-berth with args and returns stdout, stderr and the
// error.
func run(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := NewRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestParseQuotas(t *testing.T) {
	cases := []struct {
		name    string
		flags   []string
		groups  string // "flavor,flavor:resource,resource;..." of the result
		wantErr string
	}{
		{"one flavor", []string{"h200:nvidia.com/gpu=8"}, "h200:nvidia.com/gpu", ""},
		{"two flavors of the same resources share a group",
			[]string{"h200:nvidia.com/gpu=8", "h200:cpu=64", "a100:nvidia.com/gpu=4", "a100:cpu=32"}, "h200,a100:nvidia.com/gpu,cpu", ""},
		{"separate resources make separate groups", []string{"h200:nvidia.com/gpu=8", "cpu:cpu=100"}, "h200:nvidia.com/gpu;cpu:cpu", ""},
		{"overlapping resources", []string{"h200:nvidia.com/gpu=8", "h200:cpu=1", "a100:nvidia.com/gpu=8"}, "", "both set nvidia.com/gpu"},
		{"no flavor", []string{"nvidia.com/gpu=8"}, "", "no flavor, resource or amount"},
		{"not a quantity", []string{"h200:nvidia.com/gpu=eight"}, "", `"eight" is not a quantity`},
		{"too many amounts", []string{"h200:nvidia.com/gpu=8:1:1:1"}, "", "more than three amounts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			groups, err := parseQuotas(tc.flags)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range groups {
				var flavors, res []string
				for _, f := range g.Flavors {
					flavors = append(flavors, f.Name)
				}
				for _, r := range g.CoveredResources {
					res = append(res, string(r))
				}
				got = append(got, strings.Join(flavors, ",")+":"+strings.Join(res, ","))
			}
			if s := strings.Join(got, ";"); s != tc.groups {
				t.Errorf("groups %q, want %q", s, tc.groups)
			}
		})
	}
}

func TestParseQuotaLimits(t *testing.T) {
	q, flavor, err := parseQuota("h200:nvidia.com/gpu=64:16:8")
	if err != nil {
		t.Fatal(err)
	}
	if flavor != "h200" || q.NominalQuota.String() != "64" || q.BorrowingLimit.String() != "16" || q.LendingLimit.String() != "8" {
		t.Errorf("parseQuota = %s %+v", flavor, q)
	}
}

func TestImportFromFile(t *testing.T) {
	out, errOut, err := run("import", "kueue", "-f", "../importkueue/testdata/provisioning-topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kind: ClusterQueue") || !strings.Contains(out, "name: training") {
		t.Errorf("stdout lacks the ClusterQueue:\n%s", out)
	}
	if !strings.HasPrefix(errOut, "11 settings were not mapped:\nKIND") {
		t.Errorf("stderr = %q, want the table of what was not mapped", errOut)
	}
}

func TestImportNeedsASource(t *testing.T) {
	_, _, err := run("import", "kueue")
	if err == nil || !strings.Contains(err.Error(), "at least one of the flags in the group [filename from-cluster] is required") {
		t.Errorf("err = %v", err)
	}
	_, _, err = run("import", "kueue", "-f", "missing.yaml")
	if err == nil || !strings.Contains(err.Error(), "reading missing.yaml") {
		t.Errorf("err = %v", err)
	}
	_, _, err = run("import", "kueue", "-f", "../importkueue/testdata/provisioning-topology.yaml", "-o", "xml")
	if err == nil || !strings.Contains(err.Error(), `--output "xml": use yaml or json`) {
		t.Errorf("err = %v", err)
	}
}

func TestCreateDryRun(t *testing.T) {
	out, _, err := run("create", "localqueue", "team", "-n", "team-a", "--clusterqueue", "gpu", "--weight", "2", "--dry-run", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind": "LocalQueue"`, `"namespace": "team-a"`, `"clusterQueue": "gpu"`, `"weight": "2"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	out, _, err = run("create", "rf", "h200", "--node-labels", "gpu=h200", "--topology-levels", "zone,rack", "--provisioning", "IfNeeded", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: ResourceFlavor", "gpu: h200", "- rack", "mode: IfNeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// TestCreateClusterQueueNamespaces requires --namespace-selector: unset
// selects no namespace, so the command asks for the namespaces meant.
func TestCreateClusterQueueNamespaces(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "no selector", args: nil, wantErr: `required flag(s) "namespace-selector" not set`},
		{name: "every namespace", args: []string{"--namespace-selector", ""}, want: "namespaceSelector: {}"},
		{name: "one team", args: []string{"--namespace-selector", "team=a"}, want: "team: a"},
		{name: "bad selector", args: []string{"--namespace-selector", "team in (a"}, wantErr: `--namespace-selector "team in (a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"create", "clusterqueue", "gpu", "--quota", "h200:nvidia.com/gpu=8", "--dry-run"}, tt.args...)
			out, _, err := run(args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(out, tt.want) {
				t.Errorf("out = %s, err = %v; want output containing %q", out, err, tt.want)
			}
		})
	}
}
