package trainjob

import (
	"fmt"
	"os"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/jobs"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

// replicated is a replicated job of a runtime's JobSet template: its step
// (the ancestor label; "" for none), replicas, parallelism and the GPUs
// of its "node" container.
func replicated(name, step string, replicas, parallelism int32, gpus string) jobsetv1.ReplicatedJob {
	rj := jobsetv1.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: nodeName, Image: "runtime:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse(gpus)}}}}}}}}}
	if parallelism > 0 {
		rj.Template.Spec.Parallelism = ptr.To(parallelism)
	}
	if step != "" {
		rj.Template.Labels = map[string]string{ancestorLabel: step}
	}
	return rj
}

// clusterRuntime is a ClusterTrainingRuntime of policy and rjs.
func clusterRuntime(name string, policy *trainer.MLPolicy, rjs ...jobsetv1.ReplicatedJob) *trainer.ClusterTrainingRuntime {
	return &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: trainer.TrainingRuntimeSpec{MLPolicy: policy, Template: trainer.JobSetTemplateSpec{Spec: jobsetv1.JobSetSpec{ReplicatedJobs: rjs}}}}
}

func torch(nodes int32) *trainer.MLPolicy {
	return &trainer.MLPolicy{NumNodes: ptr.To(nodes), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
}

func mpi(nodes int32, launcherAsNode bool) *trainer.MLPolicy {
	return &trainer.MLPolicy{NumNodes: ptr.To(nodes), MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{
		RunLauncherAsNode: ptr.To(launcherAsNode), NumProcPerNode: ptr.To[int32](1)}}}
}

// newTrainJob is TrainJob team-a/train, queued, on ClusterTrainingRuntime
// runtime.
func newTrainJob(runtime string, opts ...func(*trainer.TrainJob)) *trainer.TrainJob {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "tj-uid",
		Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: runtime}}}
	for _, o := range opts {
		o(tj)
	}
	return tj
}

func nodes(n int32) func(*trainer.TrainJob) {
	return func(tj *trainer.TrainJob) {
		if tj.Spec.Trainer == nil {
			tj.Spec.Trainer = &trainer.Trainer{}
		}
		tj.Spec.Trainer.NumNodes = ptr.To(n)
	}
}

func perNode(gpus string) func(*trainer.TrainJob) {
	return func(tj *trainer.TrainJob) {
		if tj.Spec.Trainer == nil {
			tj.Spec.Trainer = &trainer.Trainer{}
		}
		tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse(gpus)}}
	}
}

// scheme is fakeapi's with the trainer's types.
func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := fakeapi.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := trainer.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeClient holds objs, with the status subresources of the API server.
func fakeClient(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).
		WithStatusSubresource(&trainer.TrainJob{}, &jobsetv1.JobSet{}, &berthv1.Workload{}).Build()
}

// podSetsOf loads tj with objs in the API and describes its pod sets as
// "name:count:gpus".
func podSetsOf(t *testing.T, tj *trainer.TrainJob, objs ...client.Object) (string, error) {
	t.Helper()
	j, err := Kind{}.Load(t.Context(), fakeClient(t, objs...), tj)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	sets, err := j.PodSets()
	var out []string
	for _, ps := range sets {
		q := ps.Requests[gpu]
		out = append(out, fmt.Sprintf("%s:%d:%s", ps.Name, ps.Count, q.String()))
	}
	return strings.Join(out, " "), err
}

func TestPodSets(t *testing.T) {
	many := make([]jobsetv1.ReplicatedJob, 9)
	for i := range many {
		many[i] = replicated(fmt.Sprintf("job-%d", i), "", 1, 1, "1")
	}
	tests := []struct {
		name    string
		runtime client.Object
		tj      *trainer.TrainJob
		want    string
		wantErr string
	}{
		{name: "the policy's numNodes sizes the trainer step", runtime: clusterRuntime("torch", torch(2), replicated("node", ancestorTrainer, 1, 0, "8")),
			tj: newTrainJob("torch"), want: "node:2:8"},
		{name: "spec.trainer.numNodes overrides it, resourcesPerNode the node's requests",
			runtime: clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 1, 0, "8")),
			tj:      newTrainJob("torch", nodes(4), perNode("4")), want: "node:4:4"},
		{name: "the trainer step runs one Job whatever its replicas; other jobs replicas × parallelism",
			runtime: clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 3, 0, "8"), replicated("ps", "", 2, 3, "0")),
			tj:      newTrainJob("torch", nodes(2)), want: "node:2:8 ps:6:0"},
		{name: "initializers run one Job", runtime: clusterRuntime("torch", torch(1),
			replicated(datasetInitializer, datasetInitializer, 4, 0, "0"), replicated("node", ancestorTrainer, 1, 0, "8")),
			tj: newTrainJob("torch"), want: "dataset-initializer:1:0 node:1:8"},
		{name: "without an ML policy, the trainer step is its parallelism and resourcesPerNode is not applied",
			runtime: clusterRuntime("plain", nil, replicated("node", ancestorTrainer, 1, 2, "8")),
			tj:      newTrainJob("plain", perNode("1")), want: "node:2:8"},
		{name: "without an ML policy, numNodes still sizes the trainer step",
			runtime: clusterRuntime("plain", nil, replicated("node", ancestorTrainer, 1, 2, "8")),
			tj:      newTrainJob("plain", nodes(5)), want: "node:5:8"},
		{name: "MPI sizes the node job; the launcher keeps the policy's numNodes",
			runtime: clusterRuntime("mpi", mpi(1, false), replicated("launcher", ancestorTrainer, 1, 0, "0"), replicated("node", "", 1, 0, "8")),
			tj:      newTrainJob("mpi", nodes(4)), want: "launcher:1:0 node:4:8"},
		{name: "MPI with the launcher as a node: one node less, resourcesPerNode on the node job too",
			runtime: clusterRuntime("mpi", mpi(1, true), replicated("node", "", 1, 0, "8"), replicated("launcher", ancestorTrainer, 1, 0, "8")),
			tj:      newTrainJob("mpi", nodes(4), perNode("2")), want: "node:3:2 launcher:1:2"},
		{name: "a TrainingRuntime of the TrainJob's namespace", runtime: &trainer.TrainingRuntime{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "local"},
			Spec:       clusterRuntime("", torch(3), replicated("node", ancestorTrainer, 1, 0, "1")).Spec},
			tj: newTrainJob("local", func(tj *trainer.TrainJob) { tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind) }), want: "node:3:1"},
		{name: "a runtime that does not exist", tj: newTrainJob("gone"),
			wantErr: `the TrainJob's runtime, ClusterTrainingRuntime "gone", does not exist: create it, or reference one that does (spec.runtimeRef)`},
		{name: "a TrainingRuntime of another namespace", runtime: &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "local"}},
			tj:      newTrainJob("local", func(tj *trainer.TrainJob) { tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind) }),
			wantErr: `TrainingRuntime "local" in namespace team-a, does not exist`},
		{name: "a kind Trainer does not run", tj: newTrainJob("x", func(tj *trainer.TrainJob) { tj.Spec.RuntimeRef.Kind = ptr.To("ConfigMap") }),
			wantErr: `spec.runtimeRef names ConfigMap.trainer.kubeflow.org "x", which Trainer does not run`},
		{name: "no runtime named", tj: newTrainJob(""), wantErr: "spec.runtimeRef.name is empty"},
		{name: "managed by another controller", runtime: clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 1, 0, "8")),
			tj:      newTrainJob("torch", func(tj *trainer.TrainJob) { tj.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") }),
			wantErr: `spec.managedBy is "kueue.x-k8s.io/multikueue"`},
		{name: "zero nodes", runtime: clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 1, 0, "8")),
			tj: newTrainJob("torch", nodes(0)), wantErr: "spec.trainer.numNodes is 0: the trainer step would run no pods"},
		{name: "more pod sets than a workload holds", runtime: clusterRuntime("wide", nil, many...), tj: newTrainJob("wide"),
			wantErr: `ClusterTrainingRuntime "wide" runs 9 replicated jobs; berth admits at most 8 pod sets per gang`},
		{name: "a runtime that runs nothing", runtime: clusterRuntime("empty", nil), tj: newTrainJob("empty"),
			wantErr: `ClusterTrainingRuntime "empty" has no replicatedJobs`},
		{name: "more pods than berth counts", runtime: clusterRuntime("huge", nil, replicated("workers", "", 1<<16, 1<<16, "1")), tj: newTrainJob("huge"),
			wantErr: `replicated job "workers" runs 4294967296 pods, more than berth can count`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []client.Object
			if tt.runtime != nil {
				objs = append(objs, tt.runtime)
			}
			got, err := podSetsOf(t, tt.tj, objs...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("pod sets %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPodSetsWhileRunning: a running TrainJob is charged at least what the
// JobSet the trainer runs holds, so that its runtime edited meanwhile does
// not release quota under pods that keep running.
func TestPodSetsWhileRunning(t *testing.T) {
	small := clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 1, 0, "1"))
	running := func(tj *trainer.TrainJob, suspend bool) *jobsetv1.JobSet {
		rj := replicated("node", ancestorTrainer, 1, 4, "8")
		rj.Template.Spec.Completions = ptr.To[int32](4)
		return &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: tj.Name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name,
				UID: tj.UID, Controller: ptr.To(true)}}},
			Spec: jobsetv1.JobSetSpec{Suspend: ptr.To(suspend), ReplicatedJobs: []jobsetv1.ReplicatedJob{rj}}}
	}
	resumed := func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) }
	tests := []struct {
		name string
		tj   *trainer.TrainJob
		objs func(tj *trainer.TrainJob) []client.Object
		want string
	}{
		{name: "running: raised to its JobSet", tj: newTrainJob("torch", resumed),
			objs: func(tj *trainer.TrainJob) []client.Object { return []client.Object{running(tj, false)} }, want: "node:4:8"},
		{name: "held: the runtime as it is", tj: newTrainJob("torch", func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) }),
			objs: func(tj *trainer.TrainJob) []client.Object { return []client.Object{running(tj, false)} }, want: "node:1:1"},
		{name: "its JobSet suspended: the runtime as it is", tj: newTrainJob("torch", resumed),
			objs: func(tj *trainer.TrainJob) []client.Object { return []client.Object{running(tj, true)} }, want: "node:1:1"},
		{name: "a JobSet of its name it does not control counts for nothing", tj: newTrainJob("torch", resumed),
			objs: func(tj *trainer.TrainJob) []client.Object {
				js := running(tj, false)
				js.OwnerReferences = nil
				return []client.Object{js}
			}, want: "node:1:1"},
		{name: "no JobSet yet", tj: newTrainJob("torch", resumed), objs: func(*trainer.TrainJob) []client.Object { return nil }, want: "node:1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := podSetsOf(t, tt.tj, append(tt.objs(tt.tj), small.DeepCopy())...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("pod sets %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPodTemplates: the Workload keeps each replicated job's template as
// its pods get it, with the JobSet controller's labels and the trainer's
// image for the node, and without berth's placement.
func TestPodTemplates(t *testing.T) {
	rt := clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 1, 0, "8"))
	tj := newTrainJob("torch", func(tj *trainer.TrainJob) {
		tj.Spec.Trainer = &trainer.Trainer{Image: ptr.To("team/trainer:2")}
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/team", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node",
				Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
					Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"disk": "ssd"}}}}}}}}}}}}
	})
	j, err := Kind{}.Load(t.Context(), fakeClient(t, rt), tj)
	if err != nil {
		t.Fatal(err)
	}
	j.SetScheduling([]jobs.PodSetScheduling{{Name: "node", NodeSelector: map[string]string{"pool": "h200"},
		Labels: map[string]string{berthv1.WorkloadLabel: "wl-uid"}}})
	ts := j.PodTemplates()
	if len(ts) != 1 {
		t.Fatalf("templates %+v, want one", ts)
	}
	if got := ts[0].Labels; got[jobsetv1.JobSetNameKey] != "train" || got[jobsetv1.ReplicatedJobNameKey] != "node" || got[berthv1.WorkloadLabel] != "" {
		t.Errorf("labels %v, want the JobSet controller's and none of berth's", got)
	}
	spec := ts[0].Spec
	if spec.Containers[0].Image != "team/trainer:2" || spec.NodeSelector["disk"] != "ssd" || spec.NodeSelector["pool"] != "" {
		t.Errorf("template %+v, want the trainer's image and the team's patch, without berth's placement", spec)
	}
}

// TestSample: the shipped sample is a TrainJob berth queues, with the gang
// its comment describes.
func TestSample(t *testing.T) {
	data, err := os.ReadFile("../../../config/samples/trainjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents, want the runtime and the TrainJob", len(docs))
	}
	rt, tj := &trainer.ClusterTrainingRuntime{}, &trainer.TrainJob{}
	for i, obj := range []any{rt, tj} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), obj); err != nil {
			t.Fatalf("decoding document %d: %v", i, err)
		}
	}
	got, err := podSetsOf(t, tj, rt)
	if err != nil {
		t.Fatal(err)
	}
	if got != "node:4:8" {
		t.Errorf("pod sets %q, want node:4:8", got)
	}
}
