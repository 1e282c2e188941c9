package trace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestReadYAML(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Job
	}{
		{
			name: "durations as strings",
			in: `jobs:
- id: j-1
  submit: 90s
  namespace: team-a
  localQueue: gpu
  kind: training
  pods: 2
  requests: {cpu: "32", memory: 256Gi, nvidia.com/gpu: 8}
  runTime: 2h
`,
			want: []Job{validJob("j-1")},
		},
		{
			name: "durations as seconds, numbers for string fields",
			in: `jobs:
- {id: 12, submit: 1.5, namespace: "2024", localQueue: q, kind: inference, pods: 1,
   requests: {cpu: 1}, runTime: 60, slo: "30", class: 7}
`,
			want: []Job{{
				ID: "12", Submit: 1500 * time.Millisecond, Namespace: "2024", LocalQueue: "q", Kind: Inference, Class: "7",
				Pods: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				RunTime: time.Minute, SLO: 30 * time.Second,
			}},
		},
		{
			name: "sorted by submit then id",
			in: `jobs:
- {id: c, submit: 20s, namespace: ns, localQueue: q, kind: training, pods: 1, requests: {cpu: 1}, runTime: 1m}
- {id: b, submit: 10s, namespace: ns, localQueue: q, kind: training, pods: 1, requests: {cpu: 1}, runTime: 1m}
- {id: a, submit: 20s, namespace: ns, localQueue: q, kind: training, pods: 1, requests: {cpu: 1}, runTime: 1m}
`,
			want: []Job{cpuJob("b", 10*time.Second), cpuJob("a", 20*time.Second), cpuJob("c", 20*time.Second)},
		},
		{name: "no jobs", in: "jobs: []\n", want: []Job{}},
		{
			name: "JSON is YAML",
			in:   `{"jobs": [{"id": "j-1", "submit": "90s", "namespace": "team-a", "localQueue": "gpu", "kind": "training", "pods": 2, "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}, "runTime": "2h"}]}`,
			want: []Job{validJob("j-1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadYAML(strings.NewReader(tt.in))
			wantErr(t, err)
			sameTrace(t, got, Trace{Jobs: tt.want})
		})
	}
}

func TestReadYAMLErrors(t *testing.T) {
	const ok = "- {id: j-0, submit: 0s, namespace: ns, localQueue: q, kind: training, pods: 1, requests: {cpu: 1}, runTime: 1m}\n"
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "empty document", in: "", want: []string{"no jobs list", "jobs: []"}},
		{name: "jobs null", in: "jobs:\n", want: []string{"no jobs list"}},
		{name: "unknown top-level field", in: "jobs: []\nnodes: []\n", want: []string{`unknown field "nodes"`}},
		{name: "unknown job field", in: "jobs:\n" + ok + "- {id: j-1, sl0: 5s}\n", want: []string{`jobs[1] (job j-1): unknown field "sl0"`}},
		{name: "bad duration", in: "jobs:\n" + ok + ok + "- {id: j-1, runTime: 5 minutes}\n", want: []string{`jobs[2] (job j-1): invalid duration "5 minutes"`}},
		{name: "bad quantity", in: "jobs:\n- {id: j-1, requests: {cpu: lots}}\n", want: []string{"jobs[0] (job j-1): quantities must match"}},
		{name: "validation names index and id", in: "jobs:\n" + ok +
			"- {id: j-1, submit: 0s, namespace: ns, localQueue: q, kind: training, pods: 1, requests: {cpu: 1}, runTime: 1m}\n" +
			"- {id: j-2, submit: 0s, namespace: ns, localQueue: q, kind: training, pods: 1, requests: {cpu: 1}, runTime: 1m}\n" +
			"- {id: j-12, submit: 0s, namespace: ns, localQueue: q, kind: training, pods: 0, requests: {cpu: 1}, runTime: 1m}\n",
			want: []string{"jobs[3] (job j-12): pods must be at least 1, got 0"}},
		{name: "decode and validation problems together", in: "jobs:\n- {id: j-1, pods: x}\n- {id: j-2, submit: 0s, namespace: ns, localQueue: q, kind: training, pods: 1, requests: {cpu: 1}, runTime: -1m}\n",
			want: []string{"jobs[0] (job j-1): pods: cannot read a string as int32", "jobs[1] (job j-2): runTime must be positive, got -1m0s"}},
		{name: "duplicate key", in: "jobs: []\njobs: []\n", want: []string{"already set"}},
		{name: "not a mapping", in: "- a\n- b\n", want: []string{"reading YAML trace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadYAML(strings.NewReader(tt.in))
			wantErr(t, err, tt.want...)
		})
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	tr := Trace{Jobs: []Job{
		validJob("j-1"),
		with("j-2", func(j *Job) {
			j.Submit, j.Kind, j.Class, j.Priority = 2*time.Minute, Inference, "chat", 100
			j.NodeSelector = map[string]string{"gpu": "h100"}
			j.Topology = Topology{Mode: Required, Level: "topology.kubernetes.io/rack"}
			j.SLO = 45 * time.Second
		}),
	}}
	var buf bytes.Buffer
	wantErr(t, WriteYAML(&buf, tr))
	out := buf.String()
	for _, want := range []string{"submit: 1m30s", "runTime: 2h0m0s", "slo: 45s", "mode: Required"} {
		if !strings.Contains(out, want) {
			t.Errorf("YAML lacks %q:\n%s", want, out)
		}
	}
	got, err := ReadYAML(&buf)
	wantErr(t, err)
	sameTrace(t, got, tr)
}

func TestWriteYAMLEmptyAndInvalid(t *testing.T) {
	tests := []struct {
		name    string
		tr      Trace
		want    string
		wantErr string
	}{
		{name: "empty trace reads back", tr: Trace{}, want: "jobs: []\n"},
		{name: "invalid trace", tr: Trace{Jobs: []Job{with("j-1", func(j *Job) { j.Kind = "" })}}, wantErr: "jobs[0] (job j-1): kind must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := WriteYAML(&buf, tt.tr)
			if tt.wantErr != "" {
				wantErr(t, err, tt.wantErr)
				return
			}
			wantErr(t, err)
			if buf.String() != tt.want {
				t.Errorf("got %q, want %q", buf.String(), tt.want)
			}
			if _, err := ReadYAML(&buf); err != nil {
				t.Errorf("reading back: %v", err)
			}
		})
	}
}

func TestJobJSON(t *testing.T) {
	j := with("j-1", func(j *Job) { j.SLO = 30 * time.Second })
	data, err := json.Marshal(j)
	wantErr(t, err)
	for _, want := range []string{`"submit":"1m30s"`, `"runTime":"2h0m0s"`, `"slo":"30s"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON lacks %s: %s", want, data)
		}
	}
	if strings.Contains(string(data), "topology") {
		t.Errorf("empty topology written: %s", data)
	}
	var back Job
	wantErr(t, json.Unmarshal(data, &back))
	sameTrace(t, Trace{Jobs: []Job{back}}, Trace{Jobs: []Job{j}})

	// A lenient decoder still refuses a misspelt job field.
	err = json.Unmarshal([]byte(`{"id":"j-1","timeout":"5s"}`), &back)
	wantErr(t, err, `unknown field "timeout"`)
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	const csvTrace = "id,submit,namespace,localQueue,kind,pods,requests,runTime\nj-1,90s,team-a,gpu,training,2,cpu=32;memory=256Gi;nvidia.com/gpu=8,2h\n"
	const yamlTrace = "jobs:\n- {id: j-1, submit: 90s, namespace: team-a, localQueue: gpu, kind: training, pods: 2, requests: {cpu: \"32\", memory: 256Gi, nvidia.com/gpu: 8}, runTime: 2h}\n"
	// Tab-indented, as JSON files often are; YAML would refuse the tabs.
	const jsonTrace = "{\n\t\"jobs\": [\n\t\t{\"id\": \"j-1\", \"submit\": 90, \"namespace\": \"team-a\", \"localQueue\": \"gpu\", \"kind\": \"training\", \"pods\": 2,\n\t\t \"requests\": {\"cpu\": \"32\", \"memory\": \"256Gi\", \"nvidia.com/gpu\": \"8\"}, \"runTime\": \"2h\"}\n\t]\n}\n"
	files := map[string]string{
		"t.csv": csvTrace, "t.yaml": yamlTrace, "T.YML": yamlTrace, "t.json": jsonTrace, "t.txt": csvTrace,
		"bad.json": `{"jobs": [{"id": "j-1", "pods": 0}]}`, "extra.json": `{"jobs": []} {}`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		file    string
		wantErr []string
	}{
		{file: "t.csv"},
		{file: "t.yaml"},
		{file: "T.YML"},
		{file: "t.json"},
		{file: "t.txt", wantErr: []string{`unknown extension ".txt"`, "want .csv, .yaml, .yml or .json"}},
		{file: "missing.csv", wantErr: []string{"missing.csv", "no such file"}},
		{file: "bad.json", wantErr: []string{"bad.json", "jobs[0] (job j-1): pods must be at least 1, got 0"}},
		{file: "extra.json", wantErr: []string{"unexpected data after"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Read(filepath.Join(dir, tt.file))
			if len(tt.wantErr) > 0 {
				wantErr(t, err, tt.wantErr...)
				return
			}
			wantErr(t, err)
			sameTrace(t, got, Trace{Jobs: []Job{validJob("j-1")}})
		})
	}
}
