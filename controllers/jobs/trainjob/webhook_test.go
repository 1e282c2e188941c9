package trainjob

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/test/builders"
)

// workloadOf is the Workload of tj's 2 pods × 8 GPUs, admitted when
// admitted is set.
func workloadOf(t *testing.T, tj *trainer.TrainJob, admitted bool) *berthv1.Workload {
	t.Helper()
	wl, err := builders.Workload(tj.Namespace, jobs.WorkloadName(trainer.TrainJobKind, tj), 2, "8", admitted)
	if err != nil {
		t.Fatal(err)
	}
	return wl
}

// validator reads cached and live from the objects given.
func validator(t *testing.T, cached, live []client.Object) Validator {
	t.Helper()
	return Validator{Workloads: jobs.Workloads{Cache: fakeClient(t, cached...), API: fakeClient(t, live...)}}
}

func TestValidateCreate(t *testing.T) {
	rt := clusterRuntime("torch", torch(2), replicated("node", ancestorTrainer, 1, 0, "8"))
	tests := []struct {
		name   string
		tj     *trainer.TrainJob
		cached []client.Object
		live   []client.Object
		want   string
	}{
		{name: "a runtime berth can charge", tj: newTrainJob("torch"), cached: []client.Object{rt}},
		{name: "a runtime the cache has not seen yet", tj: newTrainJob("torch"), live: []client.Object{rt}},
		{name: "a runtime that does not exist", tj: newTrainJob("gone"),
			want: `spec: Invalid value: the TrainJob's runtime, ClusterTrainingRuntime "gone", does not exist`},
		{name: "a queue of another namespace", tj: newTrainJob("torch", func(tj *trainer.TrainJob) { tj.Labels[berthv1.QueueNameLabel] = "other/team" }),
			cached: []client.Object{rt}, want: "must be the name of a LocalQueue"},
		{name: "a TrainJob another controller runs", cached: []client.Object{rt},
			tj:   newTrainJob("torch", func(tj *trainer.TrainJob) { tj.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") }),
			want: "remove spec.managedBy to queue it with berth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := validator(t, tt.cached, tt.live).ValidateCreate(t.Context(), tt.tj)
			expectRefusal(t, err, tt.want)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	rt := clusterRuntime("torch", torch(2), replicated("node", ancestorTrainer, 1, 0, "8"))
	held := func() *trainer.TrainJob {
		tj := newTrainJob("torch")
		if err := (Defaulter{}).Default(t.Context(), tj); err != nil {
			t.Fatal(err)
		}
		return tj
	}
	resumed := func(tj *trainer.TrainJob) *trainer.TrainJob { tj.Spec.Suspend = ptr.To(false); return tj }
	tests := []struct {
		name     string
		old, new *trainer.TrainJob
		objs     []client.Object
		want     string
	}{
		{name: "resumed before admission", old: held(), new: resumed(held()), objs: []client.Object{rt, workloadOf(t, held(), false)},
			want: "berth holds this job until its workload"},
		{name: "resumed by berth once admitted", old: held(), new: resumed(held()), objs: []client.Object{rt, workloadOf(t, held(), true)}},
		{name: "berth's patch emptied of the queue", old: held(), objs: []client.Object{rt},
			new: func() *trainer.TrainJob {
				tj := held()
				tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Metadata = nil
				return tj
			}(), want: "the entry of manager berth.dev/manager is berth's"},
		{name: "berth's patch removed", old: held(), objs: []client.Object{rt},
			new: func() *trainer.TrainJob { tj := held(); tj.Spec.RuntimePatches = nil; return tj }(), want: "is berth's"},
		{name: "suspended by berth though its runtime is gone", old: resumed(held()), new: held(), objs: []client.Object{workloadOf(t, held(), true)}},
		{name: "a held TrainJob's patches changed to a runtime berth can charge", old: held(), objs: []client.Object{rt},
			new: func() *trainer.TrainJob {
				tj := held()
				tj.Spec.RuntimePatches = append([]trainer.RuntimePatch{teamPatch()}, tj.Spec.RuntimePatches...)
				return tj
			}()},
		{name: "the queue label removed while berth holds its workload", old: held(), objs: []client.Object{rt, workloadOf(t, held(), false)},
			new:  func() *trainer.TrainJob { tj := held(); delete(tj.Labels, berthv1.QueueNameLabel); return tj }(),
			want: "cannot be removed while berth holds workload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := validator(t, tt.objs, tt.objs).ValidateUpdate(t.Context(), tt.old, tt.new)
			expectRefusal(t, err, tt.want)
		})
	}
}

// expectRefusal fails t unless err is nil when want is "", or an error
// containing want otherwise.
func expectRefusal(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
}
