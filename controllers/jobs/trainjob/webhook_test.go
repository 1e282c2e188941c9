package trainjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// workloadOf is the Workload of tj, admitted when admitted is set.
func workloadOf(t *testing.T, tj *trainer.TrainJob, admitted bool) *berthv1.Workload {
	t.Helper()
	wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: jobs.WorkloadName(trainer.TrainJobKind, tj)},
		Spec: berthv1.WorkloadSpec{QueueName: "team", PodSets: []berthv1.PodSet{{Name: "node", Count: 2,
			Requests: corev1.ResourceList{gpu: resource.MustParse("8")}}}}}
	if admitted {
		a := &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: "node", Count: 2}}}
		if err := lifecycle.Apply(wl, lifecycle.Admit{Admission: a, Message: "admitted"}, metav1.Unix(1, 0)); err != nil {
			t.Fatal(err)
		}
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
