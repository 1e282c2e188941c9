package trainjob

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

// teamPatch is a runtime patch of the TrainJob's owner that sets a node
// selector on the node job's pods.
func teamPatch() trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: "example.com/team", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node",
			Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
				Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"disk": "ssd"}}}}}}}}}}}
}

func managers(tj *trainer.TrainJob) []string {
	var out []string
	for _, p := range tj.Spec.RuntimePatches {
		out = append(out, p.Manager)
	}
	return out
}

// TestScheduling: berth places a TrainJob through its own runtime patch,
// applied over the runtime and every other patch, and empties it when it
// restores the TrainJob's own scheduling; the patch keeps labelling the
// JobSet with the queue throughout.
func TestScheduling(t *testing.T) {
	own := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists}
	rt := clusterRuntime("torch", torch(1), replicated("node", ancestorTrainer, 1, 0, "8"))
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Tolerations = []corev1.Toleration{own}
	tj := newTrainJob("torch", func(tj *trainer.TrainJob) {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: Manager}, teamPatch()}
	})
	j, err := Kind{}.Load(t.Context(), fakeClient(t, rt), tj)
	if err != nil {
		t.Fatal(err)
	}
	before := j.Scheduling()
	want := []jobs.PodSetScheduling{{Name: "node", NodeSelector: map[string]string{"disk": "ssd"}, Tolerations: []corev1.Toleration{own}}}
	if !reflect.DeepEqual(before, want) {
		t.Fatalf("own scheduling %+v, want %+v", before, want)
	}

	flavor := corev1.Toleration{Key: "h200", Operator: corev1.TolerationOpExists}
	admitted := jobs.PodSetScheduling{Name: "node", NodeSelector: map[string]string{"disk": "ssd", "pool": "h200"},
		Tolerations: []corev1.Toleration{own, flavor},
		Labels:      map[string]string{berthv1.WorkloadLabel: "wl-uid", berthv1.PodSetLabel: "node"},
		Annotations: map[string]string{"autoscaling.x-k8s.io/consume-provisioning-request": "wl-1"}}
	j.SetScheduling([]jobs.PodSetScheduling{admitted})
	if got := managers(tj); !slices.Equal(got, []string{"example.com/team", Manager}) {
		t.Errorf("runtime patches %v, want berth's last, over the team's", got)
	}
	if got := j.Scheduling(); !reflect.DeepEqual(got, []jobs.PodSetScheduling{admitted}) {
		t.Errorf("placed scheduling %+v, want %+v", got, admitted)
	}
	if q := patchQueue(tj); q != "team" {
		t.Errorf("berth's patch labels the JobSet with queue %q, want team", q)
	}

	j.SetScheduling(before)
	if got := j.Scheduling(); !reflect.DeepEqual(got, want) {
		t.Errorf("restored scheduling %+v, want %+v", got, want)
	}
	p := tj.Spec.RuntimePatches[patchIndex(tj)]
	if p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs != nil {
		t.Errorf("berth's patch still places replicated jobs: %+v", p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs)
	}
	if q := patchQueue(tj); q != "team" {
		t.Errorf("after the restore berth's patch labels the JobSet with queue %q, want team", q)
	}
}

func TestDefaulter(t *testing.T) {
	forged := trainer.RuntimePatch{Manager: Manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{
			Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Metadata: &metav1.ObjectMeta{
				Labels: map[string]string{berthv1.WorkloadLabel: "someone-elses"}}}}}}}}}}}
	tests := []struct {
		name         string
		tj           *trainer.TrainJob
		wantSuspend  bool
		wantManagers []string
	}{
		{name: "a queued TrainJob is held and gets berth's patch", tj: newTrainJob("torch"), wantSuspend: true, wantManagers: []string{Manager}},
		{name: "a patch it arrives with under berth's name is replaced",
			tj:          newTrainJob("torch", func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = []trainer.RuntimePatch{forged, teamPatch()} }),
			wantSuspend: true, wantManagers: []string{"example.com/team", Manager}},
		{name: "a TrainJob without the queue label is not berth's",
			tj: newTrainJob("torch", func(tj *trainer.TrainJob) {
				tj.Labels = nil
				tj.Spec.RuntimePatches = []trainer.RuntimePatch{teamPatch()}
			}),
			wantManagers: []string{"example.com/team"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := (Defaulter{}).Default(t.Context(), tt.tj); err != nil {
				t.Fatal(err)
			}
			if got := ptr.Deref(tt.tj.Spec.Suspend, false); got != tt.wantSuspend {
				t.Errorf("suspend %v, want %v", got, tt.wantSuspend)
			}
			if got := managers(tt.tj); !slices.Equal(got, tt.wantManagers) {
				t.Errorf("runtime patches %v, want %v", got, tt.wantManagers)
			}
			if i := patchIndex(tt.tj); i >= 0 {
				p := tt.tj.Spec.RuntimePatches[i].TrainingRuntimeSpec.Template
				if p.Spec.ReplicatedJobs != nil || p.Metadata.Labels[berthv1.QueueNameLabel] != "team" {
					t.Errorf("berth's patch %+v, want only the queue label", p)
				}
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R", Message: "m"}
	}
	tests := []struct {
		name             string
		status           trainer.TrainJobStatus
		active           bool
		finished, passed bool
	}{
		{name: "never reconciled"},
		{name: "held", status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond(trainer.TrainJobSuspended, metav1.ConditionTrue)}}},
		{name: "resumed", status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond(trainer.TrainJobSuspended, metav1.ConditionFalse)}}, active: true},
		{name: "reported suspended, a Job still active", status: trainer.TrainJobStatus{
			Conditions: []metav1.Condition{cond(trainer.TrainJobSuspended, metav1.ConditionTrue)},
			JobsStatus: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](1)}}}, active: true},
		{name: "complete", status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond(trainer.TrainJobComplete, metav1.ConditionTrue)}},
			finished: true, passed: true},
		{name: "failed", status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond(trainer.TrainJobFailed, metav1.ConditionTrue)}}, finished: true},
		{name: "failed False is not failed", status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond(trainer.TrainJobFailed, metav1.ConditionFalse)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tj := newTrainJob("torch")
			tj.Status = tt.status
			j := Kind{}.Wrap(tj)
			if got := j.IsActive(); got != tt.active {
				t.Errorf("IsActive = %v, want %v", got, tt.active)
			}
			finished, passed, msg := j.Finished()
			if finished != tt.finished || passed != tt.passed || (finished && msg == "") {
				t.Errorf("Finished = %v, %v, %q, want %v, %v", finished, passed, msg, tt.finished, tt.passed)
			}
		})
	}
	j := Kind{}.Wrap(newTrainJob("torch"))
	j.Suspend()
	if !j.IsSuspended() {
		t.Error("Suspend did not hold the TrainJob")
	}
	j.Resume()
	if j.IsSuspended() {
		t.Error("Resume did not release the TrainJob")
	}
	if _, err := j.PodSets(); err == nil {
		t.Error("a TrainJob made by Wrap describes a gang without its runtime")
	}
}
