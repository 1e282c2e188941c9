package batchjob

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func container(reqs corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: reqs}}
}

func TestPodSets(t *testing.T) {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	cases := []struct {
		name        string
		parallelism *int32
		completions *int32
		spec        corev1.PodSpec
		wantCount   int32
		wantReqs    corev1.ResourceList
		wantErr     string
	}{
		{
			name:        "parallelism pods with the containers' sum",
			parallelism: ptr.To[int32](4), completions: ptr.To[int32](8),
			spec: corev1.PodSpec{Containers: []corev1.Container{
				container(corev1.ResourceList{gpu: resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("2")}),
				container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}),
			}},
			wantCount: 4,
			wantReqs:  corev1.ResourceList{gpu: resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("3")},
		},
		{
			name:        "completions below parallelism",
			parallelism: ptr.To[int32](4), completions: ptr.To[int32](2),
			spec:      corev1.PodSpec{Containers: []corev1.Container{container(corev1.ResourceList{gpu: resource.MustParse("1")})}},
			wantCount: 2,
			wantReqs:  corev1.ResourceList{gpu: resource.MustParse("1")},
		},
		{
			name: "an init container larger than the containers, plus overhead",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")})},
				Containers:     []corev1.Container{container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})},
				Overhead:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			},
			wantCount: 1,
			wantReqs:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6500m")},
		},
		{
			name:        "no pods",
			parallelism: ptr.To[int32](0),
			spec:        corev1.PodSpec{Containers: []corev1.Container{container(nil)}},
			wantErr:     "set parallelism to at least 1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := &Job{&batchv1.Job{Spec: batchv1.JobSpec{Parallelism: tc.parallelism, Completions: tc.completions,
				Template: corev1.PodTemplateSpec{Spec: tc.spec}}}}
			got, err := job.PodSets()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Name != PodSetName || got[0].Count != tc.wantCount {
				t.Fatalf("pod sets = %+v, want one %q of %d", got, PodSetName, tc.wantCount)
			}
			if len(got[0].Requests) != len(tc.wantReqs) {
				t.Fatalf("requests = %v, want %v", got[0].Requests, tc.wantReqs)
			}
			for name, want := range tc.wantReqs {
				if q := got[0].Requests[name]; q.Cmp(want) != 0 {
					t.Errorf("request %s = %s, want %s", name, q.String(), want.String())
				}
			}
		})
	}
}

func TestDefaulterSuspendsOnlyQueuedJobs(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]string
		want   *bool
	}{
		{name: "queued", labels: map[string]string{berthv1.QueueNameLabel: "team"}, want: ptr.To(true)},
		{name: "not queued", labels: map[string]string{"app": "x"}, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := &batchv1.Job{}
			job.Labels = tc.labels
			if err := (Defaulter{}).Default(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			if (job.Spec.Suspend == nil) != (tc.want == nil) || (tc.want != nil && *job.Spec.Suspend != *tc.want) {
				t.Errorf("suspend = %v, want %v", job.Spec.Suspend, tc.want)
			}
		})
	}
}

func TestFinished(t *testing.T) {
	cases := []struct {
		name                string
		conds               []batchv1.JobCondition
		finished, succeeded bool
	}{
		{name: "running"},
		{name: "complete", conds: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}, finished: true, succeeded: true},
		{name: "failed", conds: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}, finished: true},
		{name: "suspended", conds: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{&batchv1.Job{Status: batchv1.JobStatus{Conditions: tc.conds}}}
			f, s, _ := j.Finished()
			if f != tc.finished || s != tc.succeeded {
				t.Errorf("Finished() = %v, %v; want %v, %v", f, s, tc.finished, tc.succeeded)
			}
		})
	}
}
