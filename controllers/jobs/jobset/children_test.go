package jobset_test

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/jobset"
	"github.com/berth-dev/berth/controllers/jobs/trainjob"
	"github.com/berth-dev/berth/test/builders"
)

// The JobSet a queued TrainJob's trainer makes is the TrainJob's: the
// JobSet webhooks leave it unheld, and let it run only on the TrainJob's
// admission.

const gpu = corev1.ResourceName("nvidia.com/gpu")

var parents = []jobs.Kind{jobset.Kind{}, trainjob.Kind{}}

func parentTrainJob() *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "tj-uid",
		Labels: map[string]string{berthv1.QueueNameLabel: "team"}}}
}

// childOf is a JobSet named name controlled by tj, of one replicated job
// "node" of pods × gpus, suspended or not.
func childOf(tj *trainer.TrainJob, name string, pods int32, gpus string, suspend bool) *jobsetv1.JobSet {
	return &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: name,
		Labels: map[string]string{berthv1.QueueNameLabel: "team"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name,
			UID: tj.UID, Controller: ptr.To(true)}}},
		Spec: jobsetv1.JobSetSpec{Suspend: ptr.To(suspend), ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "node", Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To(pods), Completions: ptr.To(pods),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse(gpus)}}}}}}}}}}}}
}

// trainJobWorkload is tj's Workload of 4 pods × 8 GPUs, admitted or not.
func trainJobWorkload(t *testing.T, tj *trainer.TrainJob, admitted bool) *berthv1.Workload {
	t.Helper()
	wl, err := builders.Workload(tj.Namespace, jobs.WorkloadName(trainer.TrainJobKind, tj), 4, "8", admitted)
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

func reader(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s, err := fakeapi.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := trainer.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func TestDefaulterLeavesChildrenAlone(t *testing.T) {
	tj := parentTrainJob()
	tests := []struct {
		name string
		js   *jobsetv1.JobSet
		// uncached: berth's cache does not have the TrainJob yet.
		uncached bool
		want     bool
	}{
		{name: "the TrainJob's JobSet, resumed with it", js: childOf(tj, "train", 4, "8", false), want: false},
		{name: "the TrainJob's JobSet, made before berth's cache has the TrainJob", js: childOf(tj, "train", 4, "8", false), uncached: true},
		{name: "a look-alike under another name is held", js: childOf(tj, "train-forged", 4, "8", false), want: true},
		{name: "a JobSet of its own is held", js: func() *jobsetv1.JobSet {
			js := childOf(tj, "train", 4, "8", false)
			js.OwnerReferences = nil
			return js
		}(), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api, cache := reader(t, tj), reader(t, tj)
			if tt.uncached {
				cache = reader(t)
			}
			d := jobset.Defaulter{Readers: jobs.Workloads{Cache: cache, API: api}, Parents: parents}
			if err := d.Default(t.Context(), tt.js); err != nil {
				t.Fatal(err)
			}
			if got := ptr.Deref(tt.js.Spec.Suspend, false); got != tt.want {
				t.Errorf("suspend %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidatorKeepsChildrenWithinTheParentsAdmission(t *testing.T) {
	tj := parentTrainJob()
	held, admitted := trainJobWorkload(t, tj, false), trainJobWorkload(t, tj, true)
	tests := []struct {
		name     string
		old, new *jobsetv1.JobSet
		wl       *berthv1.Workload
		want     string
	}{
		{name: "created held", new: childOf(tj, "train", 4, "8", true), wl: held},
		{name: "created running before the TrainJob's admission", new: childOf(tj, "train", 4, "8", false), wl: held,
			want: "this JobSet is TrainJob train's, which berth holds until its workload"},
		{name: "resumed before the TrainJob's admission", old: childOf(tj, "train", 4, "8", true), new: childOf(tj, "train", 4, "8", false), wl: held,
			want: "leave suspend true"},
		{name: "resumed on the TrainJob's admission", old: childOf(tj, "train", 4, "8", true), new: childOf(tj, "train", 4, "8", false), wl: admitted},
		{name: "resumed with more pods than admitted", old: childOf(tj, "train", 4, "8", true), new: childOf(tj, "train", 5, "8", false), wl: admitted,
			want: `TrainJob train is admitted with 4 pods in replicated job "node"`},
		{name: "resumed with larger pods than admitted", old: childOf(tj, "train", 4, "8", true), new: childOf(tj, "train", 4, "16", false), wl: admitted,
			want: `TrainJob train is admitted with 8 of nvidia.com/gpu per pod in replicated job "node"`},
		{name: "grown while it runs", old: childOf(tj, "train", 4, "8", false), new: childOf(tj, "train", 8, "8", false), wl: admitted,
			want: "not 8: berth cannot admit a running gang's growth"},
		{name: "a replicated job the admission does not cover", old: childOf(tj, "train", 4, "8", true), wl: admitted,
			new: func() *jobsetv1.JobSet {
				js := childOf(tj, "train", 4, "8", false)
				extra := js.Spec.ReplicatedJobs[0]
				extra.Name = "extra"
				js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, extra)
				return js
			}(), want: `admitted without replicated job "extra"`},
		{name: "changed while held", old: childOf(tj, "train", 4, "8", true), new: childOf(tj, "train", 16, "8", true), wl: held},
		{name: "a look-alike resumed is held on its own Workload", old: childOf(tj, "train-forged", 4, "8", true),
			new: childOf(tj, "train-forged", 4, "8", false), wl: admitted, want: "berth holds this job until its workload (not created yet)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := reader(t, tj, tt.wl)
			v := jobset.Validator{Workloads: jobs.Workloads{Cache: c, API: c}, Parents: parents}
			var err error
			if tt.old == nil {
				_, err = v.ValidateCreate(t.Context(), tt.new)
			} else {
				_, err = v.ValidateUpdate(t.Context(), tt.old, tt.new)
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
