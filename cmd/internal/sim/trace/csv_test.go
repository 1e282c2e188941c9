package trace

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const csvFullHeader = "id,submit,namespace,localQueue,kind,class,priority,pods,requests,nodeSelector,topologyMode,topologyLevel,runTime,slo\n"

func TestReadCSV(t *testing.T) {
	full := Job{
		ID: "j-1", Submit: 90 * time.Second, Namespace: "team-a", LocalQueue: "gpu", Kind: Inference,
		Class: "chat", Priority: 100, Pods: 2,
		Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi"),
			"nvidia.com/gpu": resource.MustParse("8"),
		},
		NodeSelector: map[string]string{"gpu": "h100", "zone": "a"},
		Topology:     Topology{Mode: Required, Level: "topology.kubernetes.io/rack"},
		RunTime:      2 * time.Hour, SLO: 30 * time.Second,
	}
	minimal := Job{
		ID: "j-2", Submit: 1500 * time.Millisecond, Namespace: "team-b", LocalQueue: "default", Kind: Training,
		Pods: 1, Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, RunTime: 90 * time.Second,
	}
	tests := []struct {
		name string
		in   string
		want []Job
	}{
		{
			name: "all columns",
			in:   csvFullHeader + "j-1,90s,team-a,gpu,inference,chat,100,2,cpu=8;memory=64Gi;nvidia.com/gpu=8,gpu=h100;zone=a,Required,topology.kubernetes.io/rack,2h,30s\n",
			want: []Job{full},
		},
		{
			name: "required columns only, plain seconds",
			in:   "id,submit,namespace,localQueue,kind,pods,requests,runTime\nj-2,1.5,team-b,default,training,1,nvidia.com/gpu=1,90\n",
			want: []Job{minimal},
		},
		{
			name: "columns in any order, any case, with spaces and a BOM",
			in:   "\uFEFFrunTime, KIND ,requests,pods,localqueue,namespace,submit,id\n90s,training,nvidia.com/gpu=1;,1,default,team-b,1.5,j-2\n",
			want: []Job{minimal},
		},
		{
			name: "sorted by submit then id",
			in: "id,submit,namespace,localQueue,kind,pods,requests,runTime\n" +
				"c,20s,ns,q,training,1,cpu=1,1m\nb,10s,ns,q,training,1,cpu=1,1m\na,20s,ns,q,training,1,cpu=1,1m\n",
			want: []Job{cpuJob("b", 10*time.Second), cpuJob("a", 20*time.Second), cpuJob("c", 20*time.Second)},
		},
		{name: "header only", in: csvFullHeader, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadCSV(strings.NewReader(tt.in))
			wantErr(t, err)
			sameTrace(t, got, Trace{Jobs: tt.want})
		})
	}
}

// cpuJob is a one-pod, one-CPU training job in ns/q running a minute.
func cpuJob(id string, submit time.Duration) Job {
	return Job{
		ID: id, Submit: submit, Namespace: "ns", LocalQueue: "q", Kind: Training, Pods: 1,
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, RunTime: time.Minute,
	}
}

func TestReadCSVErrors(t *testing.T) {
	const hdr = "id,submit,namespace,localQueue,kind,pods,requests,runTime\n"
	const ok = "j-1,0s,ns,q,training,1,cpu=1,1m\n"
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "empty input", in: "", want: []string{"the input is empty", "header row: id,submit,"}},
		{name: "unknown columns are named", in: "id,submit,namespace,localQueue,kind,pods,requests,runTime,gpus,Owner\n",
			want: []string{`unknown columns "gpus", "Owner"`}},
		{name: "missing required columns", in: "id,submit,namespace,kind\n",
			want: []string{"missing required columns: localQueue, pods, requests, runTime"}},
		{name: "repeated column", in: "id,submit,namespace,localQueue,kind,pods,requests,runTime,Pods\n",
			want: []string{"columns given more than once: pods"}},
		{name: "wrong number of fields", in: hdr + ok + "j-2,0s,ns\n", want: []string{"line 3", "wrong number of fields"}},
		{name: "bad pods cell", in: hdr + ok + "j-12,0s,ns,q,training,two,cpu=1,1m\n",
			want: []string{`line 3 (job j-12): pods: invalid whole number "two"`}},
		{name: "bad duration cell", in: hdr + "j-1,5 min,ns,q,training,1,cpu=1,1m\n",
			want: []string{`line 2 (job j-1): submit: invalid duration "5 min"`}},
		{name: "bad quantity", in: hdr + "j-1,0s,ns,q,training,1,cpu=eight,1m\n",
			want: []string{"line 2 (job j-1): requests: cpu=eight is not a quantity"}},
		{name: "request without value", in: hdr + "j-1,0s,ns,q,training,1,cpu,1m\n",
			want: []string{`requests: "cpu" is not key=value`}},
		{name: "repeated request", in: hdr + "j-1,0s,ns,q,training,1,cpu=1;cpu=2,1m\n",
			want: []string{`requests: key "cpu" is given more than once`}},
		{name: "bad node selector", in: "id,submit,namespace,localQueue,kind,pods,requests,runTime,nodeSelector\nj-1,0s,ns,q,training,1,cpu=1,1m,=x\n",
			want: []string{`nodeSelector: "=x" is not key=value`}},
		{name: "validation names the line", in: hdr + ok + "j-2,0s,ns,q,training,1,cpu=1,1m\n" +
			"j-3,0s,ns,q,training,1,cpu=1,1m\nj-4,0s,ns,q,training,1,cpu=1,1m\nj-5,0s,ns,q,training,1,cpu=1,1m\n" +
			"j-12,0s,ns,q,training,0,cpu=1,1m\n",
			want: []string{"line 7 (job j-12): pods must be at least 1, got 0"}},
		{name: "quoted cell spanning lines keeps the line of the row", in: hdr + "j-1,0s,\"n\ns\",q,training,1,cpu=1,1m\nj-2,0s,ns,q,batch,1,cpu=1,1m\n",
			want: []string{`line 4 (job j-2): kind must be "training" or "inference", got "batch"`}},
		{name: "duplicate id names both lines", in: hdr + ok + ok, want: []string{`line 3 (job j-1): id "j-1" is already used by line 2`}},
		{name: "empty id", in: hdr + ",0s,ns,q,training,1,cpu=1,1m\n", want: []string{"line 2: id must not be empty"}},
		{name: "all problems together", in: hdr + "j-1,0s,,q,training,1,,1m\nj-2,x,ns,q,training,1,cpu=1,1m\n",
			want: []string{"line 2 (job j-1): namespace must not be empty", "line 2 (job j-1): requests must name at least one resource", "line 3 (job j-2): submit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadCSV(strings.NewReader(tt.in))
			wantErr(t, err, tt.want...)
		})
	}
}

func TestCSVRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		tr   Trace
	}{
		{name: "empty", tr: Trace{}},
		{name: "varied jobs", tr: Trace{Jobs: []Job{
			validJob("j-1"),
			with("j-2", func(j *Job) {
				j.Submit, j.Kind, j.Class, j.Priority = 90*time.Second+1500*time.Millisecond, Inference, "chat, large", -3
				j.NodeSelector = map[string]string{"gpu": "h100", "pool": "a"}
				j.Topology = Topology{Mode: Preferred, Level: "topology.kubernetes.io/rack"}
				j.SLO = 45 * time.Second
				j.Requests["example.com/fpga"] = resource.MustParse("500m")
			}),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			wantErr(t, WriteCSV(&buf, tt.tr))
			if !strings.HasPrefix(buf.String(), csvFullHeader) {
				t.Fatalf("no full header:\n%s", buf.String())
			}
			got, err := ReadCSV(&buf)
			wantErr(t, err)
			sameTrace(t, got, tt.tr)
		})
	}
}

func TestWriteCSVFormat(t *testing.T) {
	var buf bytes.Buffer
	j := with("j-1", func(j *Job) { j.NodeSelector = map[string]string{"zone": "b", "gpu": "h100"} })
	wantErr(t, WriteCSV(&buf, Trace{Jobs: []Job{j}}))
	want := csvFullHeader + "j-1,1m30s,team-a,gpu,training,,0,2,cpu=32;memory=256Gi;nvidia.com/gpu=8,gpu=h100;zone=b,,,2h0m0s,\n"
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestWriteCSVRefusesInvalid(t *testing.T) {
	var buf bytes.Buffer
	err := WriteCSV(&buf, Trace{Jobs: []Job{with("j-1", func(j *Job) { j.Pods = 0 })}})
	wantErr(t, err, "writing CSV trace", "jobs[0] (job j-1): pods must be at least 1, got 0")
	if buf.Len() != 0 {
		t.Errorf("wrote %q for an invalid trace", buf.String())
	}
}
