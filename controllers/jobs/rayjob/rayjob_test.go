package rayjob

import (
	"context"
	"maps"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

func template(gpus string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse(gpus)}}}}}}
}

func group(name string, replicas int32) rayv1.WorkerGroupSpec {
	return rayv1.WorkerGroupSpec{GroupName: name, Replicas: ptr.To(replicas), MinReplicas: ptr.To[int32](0),
		MaxReplicas: ptr.To[int32](100), NumOfHosts: 1, Template: template("8")}
}

// newRayJob is a queueable RayJob: a 1-GPU head and the given worker groups.
func newRayJob(groups ...rayv1.WorkerGroupSpec) *rayv1.RayJob {
	return &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec: rayv1.RayJobSpec{ShutdownAfterJobFinishes: true, RayClusterSpec: &rayv1.RayClusterSpec{
			HeadGroupSpec: rayv1.HeadGroupSpec{Template: template("1")}, WorkerGroupSpecs: groups}},
	}
}

// want is a pod set's expected size and requests.
type want struct {
	count int32
	gpus  int64
	cpu   string // "" when the pod set requests no CPU
}

// podSetCase is a RayJob change and the pod sets it makes, or the error.
type podSetCase struct {
	name    string
	mutate  func(*rayv1.RayJob)
	want    map[string]want
	wantErr string
}

// podSetCases are the RayJobs TestPodSets tries, each a change to a
// RayJob of a 1-GPU head and 4 workers of 8 GPUs.
func podSetCases() []podSetCase {
	many := make([]rayv1.WorkerGroupSpec, 7)
	for i := range many {
		many[i] = group(string(rune('a'+i)), 1)
	}
	return []podSetCase{
		{name: "head, workers and KubeRay's default submitter", mutate: func(rj *rayv1.RayJob) {},
			want: map[string]want{"head": {1, 1, ""}, "workers": {4, 8, ""}, "submitter": {1, 0, "500m"}}},
		{name: "the submitter's own template", mutate: func(rj *rayv1.RayJob) {
			tpl := template("0")
			tpl.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			rj.Spec.SubmitterPodTemplate = &tpl
		}, want: map[string]want{"head": {1, 1, ""}, "workers": {4, 8, ""}, "submitter": {1, 0, "2"}}},
		{name: "HTTPMode runs no submitter pod", mutate: func(rj *rayv1.RayJob) { rj.Spec.SubmissionMode = rayv1.HTTPMode },
			want: map[string]want{"head": {1, 1, ""}, "workers": {4, 8, ""}}},
		{name: "SidecarMode adds the submitter to the head", mutate: func(rj *rayv1.RayJob) { rj.Spec.SubmissionMode = rayv1.SidecarMode },
			want: map[string]want{"head": {1, 1, "500m"}, "workers": {4, 8, ""}}},
		{name: "replicas times numOfHosts", mutate: func(rj *rayv1.RayJob) { rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].NumOfHosts = 2 },
			want: map[string]want{"head": {1, 1, ""}, "workers": {8, 8, ""}, "submitter": {1, 0, "500m"}}},
		{name: "replicas below minReplicas run minReplicas", mutate: func(rj *rayv1.RayJob) {
			rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](6)
		}, want: map[string]want{"head": {1, 1, ""}, "workers": {6, 8, ""}, "submitter": {1, 0, "500m"}}},
		{name: "replicas above maxReplicas run maxReplicas", mutate: func(rj *rayv1.RayJob) {
			rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](3)
		}, want: map[string]want{"head": {1, 1, ""}, "workers": {3, 8, ""}, "submitter": {1, 0, "500m"}}},
		{name: "a suspended worker group runs no pods", mutate: func(rj *rayv1.RayJob) {
			rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].Suspend = ptr.To(true)
		}, want: map[string]want{"head": {1, 1, ""}, "submitter": {1, 0, "500m"}}},
		{name: "an existing cluster", mutate: func(rj *rayv1.RayJob) { rj.Spec.ClusterSelector = map[string]string{"ray.io/cluster": "shared"} },
			wantErr: "spec.clusterSelector"},
		{name: "no cluster spec", mutate: func(rj *rayv1.RayJob) { rj.Spec.RayClusterSpec = nil }, wantErr: "no spec.rayClusterSpec"},
		{name: "the cluster outlives the job", mutate: func(rj *rayv1.RayJob) { rj.Spec.ShutdownAfterJobFinishes = false },
			wantErr: "shutdownAfterJobFinishes is false"},
		{name: "in-tree autoscaling: admitted at the minimum", mutate: func(rj *rayv1.RayJob) {
			rj.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true)
			rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](2)
		}, want: map[string]want{"head": {1, 1, ""}, "workers": {2, 8, ""}, "submitter": {1, 0, "500m"}}},
		{name: "a worker group named like berth's pod sets", mutate: func(rj *rayv1.RayJob) {
			rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].GroupName = "submitter"
		}, wantErr: `worker group "submitter": the name is taken`},
		{name: "more pod sets than a workload holds", mutate: func(rj *rayv1.RayJob) { rj.Spec.RayClusterSpec.WorkerGroupSpecs = many },
			wantErr: "runs 9 pod sets (the head, 7 worker groups and the submitter); berth admits at most 8"},
		{name: "more pods than berth counts", mutate: func(rj *rayv1.RayJob) {
			g := &rj.Spec.RayClusterSpec.WorkerGroupSpecs[0]
			g.Replicas, g.MaxReplicas, g.NumOfHosts = ptr.To[int32](1<<16), ptr.To[int32](1<<16), 1<<16
		}, wantErr: `worker group "workers" runs 4294967296 pods`},
	}
}

func TestPodSets(t *testing.T) {
	tests := podSetCases()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rj := newRayJob(group("workers", 4))
			tt.mutate(rj)
			got, err := (&RayJob{rj}).PodSets()
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
				t.Fatalf("got pod sets %v, want %v", got, tt.want)
			}
			for _, ps := range got {
				w, ok := tt.want[ps.Name]
				if !ok {
					t.Fatalf("unexpected pod set %q", ps.Name)
				}
				q := ps.Requests[gpu]
				if ps.Count != w.count || q.Value() != w.gpus {
					t.Errorf("pod set %s: %d pods of %s GPUs, want %d of %d", ps.Name, ps.Count, q.String(), w.count, w.gpus)
				}
				if cpu := ps.Requests[corev1.ResourceCPU]; cpu.String() != w.cpu && w.cpu != "" || w.cpu == "" && !cpu.IsZero() {
					t.Errorf("pod set %s: cpu %s, want %q", ps.Name, cpu.String(), w.cpu)
				}
			}
		})
	}
}

func TestFinishedAndActive(t *testing.T) {
	tests := []struct {
		deployment             rayv1.JobDeploymentStatus
		job                    rayv1.JobStatus
		finished, ok, isActive bool
		msg                    string
	}{
		{deployment: rayv1.JobDeploymentStatusNew},
		{deployment: rayv1.JobDeploymentStatusSuspended},
		{deployment: rayv1.JobDeploymentStatusInitializing, isActive: true},
		{deployment: rayv1.JobDeploymentStatusRunning, job: rayv1.JobStatusRunning, isActive: true},
		{deployment: rayv1.JobDeploymentStatusSuspending, isActive: true},
		{deployment: rayv1.JobDeploymentStatusComplete, job: rayv1.JobStatusSucceeded, finished: true, ok: true, isActive: true, msg: "succeeded"},
		{deployment: rayv1.JobDeploymentStatusComplete, job: rayv1.JobStatusStopped, finished: true, isActive: true, msg: "Ray job status STOPPED"},
		{deployment: rayv1.JobDeploymentStatusFailed, job: rayv1.JobStatusFailed, finished: true, isActive: true, msg: "failed (AppFailed)"},
		{deployment: rayv1.JobDeploymentStatusValidationFailed, finished: true, isActive: true, msg: "KubeRay refused"},
	}
	for _, tt := range tests {
		t.Run(string(tt.deployment)+"/"+string(tt.job), func(t *testing.T) {
			rj := newRayJob()
			rj.Status = rayv1.RayJobStatus{JobDeploymentStatus: tt.deployment, JobStatus: tt.job}
			if tt.deployment == rayv1.JobDeploymentStatusFailed {
				rj.Status.Reason = rayv1.AppFailed
			}
			j := &RayJob{rj}
			finished, ok, msg := j.Finished()
			if finished != tt.finished || ok != tt.ok || !strings.Contains(msg, tt.msg) {
				t.Errorf("Finished() = %v, %v, %q; want %v, %v, containing %q", finished, ok, msg, tt.finished, tt.ok, tt.msg)
			}
			if got := j.IsActive(); got != tt.isActive {
				t.Errorf("IsActive() = %v, want %v", got, tt.isActive)
			}
		})
	}
}

// TestScheduling: berth places the head, the worker groups and a declared
// submitter template, and leaves KubeRay's default submitter alone (setting
// a template of berth's own would replace KubeRay's default container).
func TestScheduling(t *testing.T) {
	for _, declared := range []bool{false, true} {
		rj := newRayJob(group("workers", 2))
		if declared {
			tpl := template("0")
			rj.Spec.SubmitterPodTemplate = &tpl
		}
		j := &RayJob{rj}
		var s []jobs.PodSetScheduling
		for _, ps := range j.podSetNames() {
			s = append(s, jobs.PodSetScheduling{Name: ps, NodeSelector: map[string]string{"pool": "a100"},
				Labels: map[string]string{berthv1.PodSetLabel: ps}})
		}
		j.SetScheduling(s)
		got := j.Scheduling()
		want := []string{"head", "workers"}
		if declared {
			want = append(want, "submitter")
		}
		if len(got) != len(want) {
			t.Fatalf("declared submitter %v: scheduling of %d pod sets, want %v", declared, len(got), want)
		}
		for i, ps := range got {
			if ps.Name != want[i] || ps.NodeSelector["pool"] != "a100" || ps.Labels[berthv1.PodSetLabel] != want[i] {
				t.Errorf("pod set %d = %+v, want %s placed on a100", i, ps, want[i])
			}
		}
		if !declared && rj.Spec.SubmitterPodTemplate != nil {
			t.Errorf("berth created a submitter template: %+v", rj.Spec.SubmitterPodTemplate)
		}
	}
}

func TestDefaulterAndValidator(t *testing.T) {
	rj := newRayJob(group("workers", 1))
	if err := (Defaulter{}).Default(context.Background(), rj); err != nil || !rj.Spec.Suspend {
		t.Fatalf("Default: err %v, suspend %v; want a held RayJob", err, rj.Spec.Suspend)
	}
	scaling := newRayJob(group("workers", 4))
	scaling.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true)
	scaling.Spec.RayClusterSpec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](1)
	if err := (Defaulter{}).Default(context.Background(), scaling); err != nil || *scaling.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas != 1 {
		t.Fatalf("Default: err %v, replicas %d; want an autoscaling cluster started at minReplicas 1",
			err, *scaling.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas)
	}
	unlabelled := newRayJob()
	delete(unlabelled.Labels, berthv1.QueueNameLabel)
	if err := (Defaulter{}).Default(context.Background(), unlabelled); err != nil || unlabelled.Spec.Suspend {
		t.Fatalf("Default held a RayJob with no queue: err %v, suspend %v", err, unlabelled.Spec.Suspend)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*rayv1.RayJob)
		want   string
	}{
		{name: "queueable", mutate: func(*rayv1.RayJob) {}},
		{name: "queue of another namespace", mutate: func(rj *rayv1.RayJob) { rj.Labels[berthv1.QueueNameLabel] = "ns/team" },
			want: "must be the name of a LocalQueue"},
		{name: "a cluster that outlives the job", mutate: func(rj *rayv1.RayJob) { rj.Spec.ShutdownAfterJobFinishes = false },
			want: "spec: Invalid value: spec.shutdownAfterJobFinishes is false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rj := newRayJob(group("workers", 1))
			tc.mutate(rj)
			_, err := Validator{}.ValidateCreate(context.Background(), rj)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSample: the shipped sample is a RayJob berth queues, with the gang
// its comment describes.
func TestSample(t *testing.T) {
	data, err := os.ReadFile("../../../config/samples/rayjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rj := &rayv1.RayJob{}
	if err := yaml.UnmarshalStrict(data, rj); err != nil {
		t.Fatalf("decoding the sample: %v", err)
	}
	if _, err := (Validator{}).ValidateCreate(context.Background(), rj); err != nil {
		t.Fatalf("the sample is refused: %v", err)
	}
	sets, err := (&RayJob{rj}).PodSets()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int32{}
	var gpus int64
	for _, ps := range sets {
		got[ps.Name] = ps.Count
		q := ps.Requests[gpu]
		gpus += q.Value() * int64(ps.Count)
	}
	if want := map[string]int32{"head": 1, "gpu-workers": 4, "submitter": 1}; !maps.Equal(got, want) || gpus != 32 {
		t.Errorf("pod sets %v of %d GPUs, want %v of 32", got, gpus, want)
	}
}

// TestDefaultSubmitterTemplate: without a template of its own, the
// submitter's pod set has KubeRay's default submitter — the head's image
// and KubeRay's requests — a spec the API server accepts in the PodTemplate
// a booking creates.
func TestDefaultSubmitterTemplate(t *testing.T) {
	rj := newRayJob(group("workers", 2))
	rj.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.46.0"
	ts := (&RayJob{rj}).PodTemplates()
	sub := ts[len(ts)-1]
	if sub.Name != SubmitterPodSet || len(sub.Spec.Containers) != 1 {
		t.Fatalf("last template %s with %d containers, want the submitter's one", sub.Name, len(sub.Spec.Containers))
	}
	c := sub.Spec.Containers[0]
	cpu := c.Resources.Requests[corev1.ResourceCPU]
	if c.Image != "rayproject/ray:2.46.0" || cpu.String() != "500m" || sub.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("submitter container %+v, restart %s; want the head's image, 500m CPU, Never", c, sub.Spec.RestartPolicy)
	}
}

// TestRunningClusterSpecFrozen: a running RayJob's cluster spec, which
// KubeRay no longer applies to its cluster and berth charges it by, cannot
// change; a held one's can.
func TestRunningClusterSpecFrozen(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := berthv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	v := Validator{Workloads: jobs.Workloads{Cache: c, API: c}}
	for _, tc := range []struct {
		name    string
		suspend bool
		want    string
	}{
		{name: "running", want: "spec.rayClusterSpec: Forbidden: a running RayJob's cluster spec cannot change"},
		{name: "held", suspend: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := newRayJob(group("workers", 8))
			old.Spec.Suspend = tc.suspend
			shrunk := old.DeepCopy()
			shrunk.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
			_, err := v.ValidateUpdate(context.Background(), old, shrunk)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
