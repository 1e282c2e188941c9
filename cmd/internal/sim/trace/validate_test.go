package trace

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		jobs []Job
		want []string // substrings of the error; none: valid
	}{
		{name: "valid", jobs: []Job{validJob("j-1"), with("j-2", func(j *Job) {
			j.Kind, j.SLO = Inference, time.Minute
			j.Topology = Topology{Mode: Preferred, Level: "rack"}
		})}},
		{name: "empty trace", jobs: nil},
		{name: "empty id", jobs: []Job{validJob("")}, want: []string{"jobs[0]: id must not be empty"}},
		{name: "duplicate id", jobs: []Job{validJob("j-1"), validJob("j-2"), validJob("j-1")},
			want: []string{`jobs[2] (job j-1): id "j-1" is already used by jobs[0]`}},
		{name: "negative submit", jobs: []Job{with("j-1", func(j *Job) { j.Submit = -time.Second })},
			want: []string{"jobs[0] (job j-1): submit must not be negative, got -1s"}},
		{name: "no namespace", jobs: []Job{with("j-1", func(j *Job) { j.Namespace = "" })},
			want: []string{"namespace must not be empty"}},
		{name: "no local queue", jobs: []Job{with("j-1", func(j *Job) { j.LocalQueue = "" })},
			want: []string{"localQueue must not be empty"}},
		{name: "bad kind", jobs: []Job{with("j-1", func(j *Job) { j.Kind = "batch" })},
			want: []string{`kind must be "training" or "inference", got "batch"`}},
		{name: "zero pods", jobs: []Job{validJob("j-0"), with("j-12", func(j *Job) { j.Pods = 0 })},
			want: []string{"jobs[1] (job j-12): pods must be at least 1, got 0"}},
		{name: "pods over the job cap", jobs: []Job{with("j-1", func(j *Job) { j.Pods = 2_000_000_000 })},
			want: []string{"jobs[0] (job j-1): pods must be at most 100000, the most the simulator takes for one job, got 2000000000"}},
		{name: "pods at the job cap", jobs: manyJobs(1, MaxJobPods)},
		{name: "pods over the trace cap", jobs: manyJobs(21, MaxJobPods),
			want: []string{"the trace has 2100000 pods in all, more than the simulator takes (2000000)"}},
		{name: "pods at the trace cap", jobs: manyJobs(20, MaxJobPods)},
		{name: "request over the pod cap", jobs: []Job{with("j-1", func(j *Job) { j.Requests[corev1.ResourceMemory] = resource.MustParse("2P") })},
			want: []string{"request memory must be at most 1P per pod, got 2P"}},
		{name: "request times pods overflows", jobs: []Job{with("j-1", func(j *Job) {
			j.Pods = MaxJobPods
			j.Requests[corev1.ResourceMemory] = resource.MustParse("1P")
		})},
			want: []string{"request memory × 100000 pods is more than the simulator can add up: at most 4.61e+15 over a job"}},
		{name: "no requests", jobs: []Job{with("j-1", func(j *Job) { j.Requests = nil })},
			want: []string{"requests must name at least one resource"}},
		{name: "negative request", jobs: []Job{with("j-1", func(j *Job) { j.Requests[corev1.ResourceCPU] = resource.MustParse("-1") })},
			want: []string{"request cpu must not be negative, got -1"}},
		{name: "zero request is allowed", jobs: []Job{with("j-1", func(j *Job) { j.Requests[corev1.ResourceCPU] = resource.MustParse("0") })}},
		{name: "zero run time", jobs: []Job{with("j-1", func(j *Job) { j.RunTime = 0 })},
			want: []string{"runTime must be positive, got 0s"}},
		{name: "topology level only", jobs: []Job{with("j-1", func(j *Job) { j.Topology.Level = "rack" })},
			want: []string{`topology mode and level must both be set or both be empty, got mode "" and level "rack"`}},
		{name: "topology mode only", jobs: []Job{with("j-1", func(j *Job) { j.Topology.Mode = Required })},
			want: []string{`got mode "Required" and level ""`}},
		{name: "unknown topology mode", jobs: []Job{with("j-1", func(j *Job) { j.Topology = Topology{Mode: "Strict", Level: "rack"} })},
			want: []string{`topology mode must be "Required" or "Preferred", got "Strict"`}},
		{name: "negative slo", jobs: []Job{with("j-1", func(j *Job) { j.SLO = -time.Second })},
			want: []string{"slo must not be negative, got -1s"}},
		{name: "empty node selector key", jobs: []Job{with("j-1", func(j *Job) { j.NodeSelector = map[string]string{"": "x"} })},
			want: []string{"nodeSelector has an empty key"}},
		{name: "all problems of a job", jobs: []Job{with("j-1", func(j *Job) { j.Pods, j.RunTime = 0, 0 })},
			want: []string{"pods must be at least 1", "runTime must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, Trace{Jobs: tt.jobs}.Validate(), tt.want...)
		})
	}
}

func TestValidateCapsProblems(t *testing.T) {
	tests := []struct {
		bad       int
		wantLines int
		wantMore  string
	}{
		{bad: 3, wantLines: 3},
		{bad: maxProblems, wantLines: maxProblems},
		{bad: 50, wantLines: maxProblems + 1, wantMore: "... and 30 more problems"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.bad), func(t *testing.T) {
			var jobs []Job
			for i := range tt.bad {
				jobs = append(jobs, with(fmt.Sprintf("j-%d", i), func(j *Job) { j.Pods = 0 }))
			}
			err := Trace{Jobs: jobs}.Validate()
			wantErr(t, err, "jobs[0] (job j-0)")
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != tt.wantLines {
				t.Errorf("got %d lines, want %d:\n%v", len(lines), tt.wantLines, err)
			}
			if last := lines[len(lines)-1]; tt.wantMore != "" && last != tt.wantMore {
				t.Errorf("last line %q, want %q", last, tt.wantMore)
			}
		})
	}
}

func TestSortJobs(t *testing.T) {
	at := func(id string, submit time.Duration, class string) Job {
		j := validJob(id)
		j.Submit, j.Class = submit, class
		return j
	}
	tests := []struct {
		name string
		in   []Job
		want []string // id/class in order
	}{
		{name: "by submit", in: []Job{at("a", 3, ""), at("b", 1, ""), at("c", 2, "")}, want: []string{"b/", "c/", "a/"}},
		{name: "ties by id", in: []Job{at("z", 1, ""), at("a", 1, ""), at("m", 0, "")}, want: []string{"m/", "a/", "z/"}},
		{name: "stable on equal keys", in: []Job{at("a", 1, "first"), at("a", 1, "second")}, want: []string{"a/first", "a/second"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sortJobs(tt.in)
			var got []string
			for _, j := range tt.in {
				got = append(got, j.ID+"/"+j.Class)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("order %v, want %v", got, tt.want)
			}
		})
	}
}

// manyJobs is n valid jobs of pods one-GPU pods each.
func manyJobs(n int, pods int32) []Job {
	jobs := make([]Job, n)
	for i := range jobs {
		jobs[i] = with(fmt.Sprintf("j-%d", i), func(j *Job) {
			j.Pods = pods
			j.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		})
	}
	return jobs
}
