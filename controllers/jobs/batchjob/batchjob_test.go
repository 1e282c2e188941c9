package batchjob

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestDefaulterAsksForTheGang(t *testing.T) {
	queued := map[string]string{berthv1.QueueNameLabel: "team"}
	own := &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
		Basic: &schedulingv1alpha3.WorkloadPodGroupBasicSchedulingPolicy{}}}
	cases := []struct {
		name string
		gang bool
		job  func(*batchv1.Job)
		want int32 // the gang minCount asked for, 0 none
	}{
		{name: "a queued gang asks for all its pods", gang: true, want: 4},
		{name: "completions below parallelism bound the gang", gang: true, job: func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](3) }, want: 3},
		{name: "hand-off off: nothing asked", job: func(*batchv1.Job) {}},
		{name: "not queued", gang: true, job: func(j *batchv1.Job) { j.Labels = nil }},
		{name: "a gang of one", gang: true, job: func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](1) }},
		{name: "a Job that says how it is scheduled keeps it", gang: true, job: func(j *batchv1.Job) { j.Spec.Scheduling = own }},
		{name: "a template that names a group keeps it", gang: true, job: func(j *batchv1.Job) {
			j.Spec.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("mine")}
		}},
		{name: "a JobSet's Job joins its parent's group", gang: true, job: func(j *batchv1.Job) {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "js-uid", Controller: ptr.To(true)}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: queued}, Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4)}}
			if tc.job != nil {
				tc.job(job)
			}
			if err := (Defaulter{Gang: tc.gang}).Default(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			w := &Job{job}
			if got := gangOf(job); got != tc.want {
				t.Errorf("gang minCount %d, want %d", got, tc.want)
			}
			if tc.want > 0 {
				w.SetGangSize(2)
				if !w.HasOwnGang() || gangOf(job) != 2 {
					t.Errorf("the gang size set at a start: %d (own gang %v), want 2", gangOf(job), w.HasOwnGang())
				}
			}
		})
	}
}

// gangOf is the gang minCount the Job asks for, 0 when it asks for none.
func gangOf(job *batchv1.Job) int32 {
	if s := job.Spec.Scheduling; s != nil && s.SchedulingPolicy != nil && s.SchedulingPolicy.Gang != nil {
		return ptr.Deref(s.SchedulingPolicy.Gang.MinCount, 0)
	}
	return 0
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
