package jobset

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

func TestPodSets(t *testing.T) {
	rj := func(name string, replicas, parallelism, completions int32) jobsetv1.ReplicatedJob {
		return jobsetv1.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To(parallelism), Completions: ptr.To(completions),
		}}}
	}
	many := make([]jobsetv1.ReplicatedJob, 9)
	for i := range many {
		many[i] = rj(string(rune('a'+i)), 1, 1, 1)
	}
	tests := []struct {
		name    string
		rjs     []jobsetv1.ReplicatedJob
		want    map[string]int32
		wantErr string
	}{
		{name: "replicas times min(parallelism, completions)", rjs: []jobsetv1.ReplicatedJob{rj("driver", 1, 1, 1), rj("workers", 4, 2, 8)},
			want: map[string]int32{"driver": 1, "workers": 8}},
		{name: "completions below parallelism", rjs: []jobsetv1.ReplicatedJob{rj("w", 2, 4, 3)}, want: map[string]int32{"w": 6}},
		{name: "zero replicas", rjs: []jobsetv1.ReplicatedJob{rj("w", 0, 1, 1)}, wantErr: "runs no pods"},
		{name: "zero parallelism", rjs: []jobsetv1.ReplicatedJob{rj("w", 1, 0, 1)}, wantErr: "runs no pods"},
		{name: "no replicated jobs", wantErr: "no replicatedJobs"},
		{name: "more pod sets than a workload holds", rjs: many, wantErr: "at most 8"},
		// JobSet's own webhook refuses this too; berth does not count on it.
		{name: "more pods than berth counts", rjs: []jobsetv1.ReplicatedJob{rj("w", 1<<16, 1<<16, 1<<16)},
			wantErr: `replicatedJob "w" runs 65536 × 65536 = 4294967296 pods, more than berth can count (2147483647): lower replicas or parallelism`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js := &JobSet{&jobsetv1.JobSet{Spec: jobsetv1.JobSetSpec{ReplicatedJobs: tt.rjs}}}
			got, err := js.PodSets()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d pod sets, want %d", len(got), len(tt.want))
			}
			for _, ps := range got {
				if ps.Count != tt.want[ps.Name] {
					t.Errorf("pod set %s: count %d, want %d", ps.Name, ps.Count, tt.want[ps.Name])
				}
			}
		})
	}
}

// TestIsChild tells the Jobs the JobSet controller makes from Jobs that
// only point their controller reference at the JobSet.
func TestIsChild(t *testing.T) {
	parent := &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{
		{Name: "workers", Replicas: 2}, {Name: "driver", Replicas: 1},
	}}}
	job := func(name, js, rj, idx string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			jobsetv1.JobSetNameKey: js, jobsetv1.ReplicatedJobNameKey: rj, jobsetv1.JobIndexKey: idx}}}
	}
	tests := []struct {
		name  string
		child *batchv1.Job
		want  bool
	}{
		{name: "a worker Job", child: job("train-workers-1", "train", "workers", "1"), want: true},
		{name: "the driver Job", child: job("train-driver-0", "train", "driver", "0"), want: true},
		{name: "an index beyond the replicas", child: job("train-workers-2", "train", "workers", "2")},
		{name: "a name the controller does not make", child: job("extra", "train", "workers", "0")},
		{name: "a replicated job the JobSet does not have", child: job("train-evil-0", "train", "evil", "0")},
		{name: "labels of another JobSet", child: job("train-workers-0", "other", "workers", "0")},
		{name: "an index label that disagrees with the name", child: job("train-workers-0", "train", "workers", "1")},
		{name: "no labels", child: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train-workers-0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Kind{}).IsChild(parent, tt.child); got != tt.want {
				t.Errorf("IsChild = %v, want %v", got, tt.want)
			}
		})
	}
}
