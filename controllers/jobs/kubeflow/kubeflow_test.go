package kubeflow

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

func spec(replicas *int32, gpus string) *kftraining.ReplicaSpec {
	return &kftraining.ReplicaSpec{Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse(gpus)}}}}}}}
}

func pytorchJob(specs map[kftraining.ReplicaType]*kftraining.ReplicaSpec) *kftraining.PyTorchJob {
	return &kftraining.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec: kftraining.PyTorchJobSpec{PyTorchReplicaSpecs: specs}}
}

func TestPodSets(t *testing.T) {
	many := map[kftraining.ReplicaType]*kftraining.ReplicaSpec{}
	for i := range 9 {
		many[kftraining.ReplicaType(string(rune('A'+i)))] = spec(nil, "1")
	}
	tests := []struct {
		name    string
		kind    jobs.Kind
		obj     func() client.Object
		want    []string // name:count
		wantErr string
	}{
		{name: "master first, then workers", kind: PyTorchJobKind{}, obj: func() client.Object {
			return pytorchJob(map[kftraining.ReplicaType]*kftraining.ReplicaSpec{"Worker": spec(ptr.To[int32](3), "8"), "Master": spec(nil, "8")})
		}, want: []string{"master:1", "worker:3"}},
		{name: "a replica type of zero replicas is no pod set", kind: PyTorchJobKind{}, obj: func() client.Object {
			return pytorchJob(map[kftraining.ReplicaType]*kftraining.ReplicaSpec{"Worker": spec(ptr.To[int32](0), "8"), "Master": spec(nil, "8")})
		}, want: []string{"master:1"}},
		{name: "launcher first for an MPIJob", kind: MPIJobKind{}, obj: func() client.Object {
			return &kftraining.MPIJob{Spec: kftraining.MPIJobSpec{MPIReplicaSpecs: map[kftraining.ReplicaType]*kftraining.ReplicaSpec{
				"Worker": spec(ptr.To[int32](2), "8"), "Launcher": spec(ptr.To[int32](1), "0")}}}
		}, want: []string{"launcher:1", "worker:2"}},
		{name: "no pods", kind: PyTorchJobKind{}, obj: func() client.Object { return pytorchJob(nil) }, wantErr: "the PyTorchJob runs no pods"},
		{name: "negative replicas", kind: PyTorchJobKind{}, obj: func() client.Object {
			return pytorchJob(map[kftraining.ReplicaType]*kftraining.ReplicaSpec{"Worker": spec(ptr.To[int32](-1), "8")})
		}, wantErr: "replica type Worker has -1 replicas"},
		{name: "more pod sets than a workload holds", kind: PyTorchJobKind{}, obj: func() client.Object { return pytorchJob(many) },
			wantErr: "has 9 replica types; berth admits at most 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.kind.Wrap(tt.obj())
			got, err := j.PodSets()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, ps := range got {
				names = append(names, fmt.Sprintf("%s:%d", ps.Name, ps.Count))
			}
			if strings.Join(names, " ") != strings.Join(tt.want, " ") {
				t.Errorf("pod sets %v, want %v", names, tt.want)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	pj := pytorchJob(map[kftraining.ReplicaType]*kftraining.ReplicaSpec{"Master": spec(nil, "8"), "Worker": spec(ptr.To[int32](2), "8")})
	if err := (Defaulter[*kftraining.PyTorchJob]{Kind: PyTorchJobKind{}}).Default(context.Background(), pj); err != nil {
		t.Fatal(err)
	}
	j := PyTorchJobKind{}.Wrap(pj)
	if !j.IsSuspended() || !ptr.Deref(pj.Spec.RunPolicy.Suspend, false) {
		t.Fatal("the defaulter did not hold a queued PyTorchJob")
	}
	j.SetScheduling([]jobs.PodSetScheduling{{Name: "worker", NodeSelector: map[string]string{"pool": "h200"},
		Labels: map[string]string{berthv1.PodSetLabel: "worker"}}})
	j.Resume()
	if j.IsSuspended() || pj.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.NodeSelector["pool"] != "h200" ||
		pj.Spec.PyTorchReplicaSpecs["Worker"].Template.Labels[berthv1.PodSetLabel] != "worker" {
		t.Fatalf("resume and placement did not reach the object: %+v", pj.Spec)
	}
	if pj.Spec.PyTorchReplicaSpecs["Master"].Template.Spec.NodeSelector != nil {
		t.Error("the master's template was placed with the workers' scheduling")
	}
	if s := j.Scheduling(); len(s) != 2 || s[1].NodeSelector["pool"] != "h200" {
		t.Errorf("Scheduling() = %+v, want master and the placed worker", s)
	}
	if j.IsActive() {
		t.Error("active before any pod runs")
	}
	pj.Status.ReplicaStatuses = map[kftraining.ReplicaType]*kftraining.ReplicaStatus{"Worker": {Active: 1}}
	if !j.IsActive() {
		t.Error("not active with an active worker")
	}
	for _, tc := range []struct {
		cond     kftraining.JobConditionType
		status   corev1.ConditionStatus
		finished bool
		ok       bool
	}{
		{cond: kftraining.JobRunning, status: corev1.ConditionTrue},
		{cond: kftraining.JobSucceeded, status: corev1.ConditionFalse},
		{cond: kftraining.JobSucceeded, status: corev1.ConditionTrue, finished: true, ok: true},
		{cond: kftraining.JobFailed, status: corev1.ConditionTrue, finished: true},
	} {
		pj.Status.Conditions = []kftraining.JobCondition{{Type: tc.cond, Status: tc.status, Message: "OOMKilled"}}
		finished, ok, msg := j.Finished()
		if finished != tc.finished || ok != tc.ok || (finished && !strings.Contains(msg, "PyTorchJob")) {
			t.Errorf("%s=%s: Finished() = %v, %v, %q", tc.cond, tc.status, finished, ok, msg)
		}
	}
}

func TestValidateCreate(t *testing.T) {
	v := Validator[*kftraining.MPIJob]{Kind: MPIJobKind{}}
	mj := &kftraining.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "allreduce", Labels: map[string]string{berthv1.QueueNameLabel: "team"}}}
	if _, err := v.ValidateCreate(context.Background(), mj); err != nil {
		t.Fatalf("a valid queue name was refused: %v", err)
	}
	mj.Labels[berthv1.QueueNameLabel] = "other/team"
	if _, err := v.ValidateCreate(context.Background(), mj); err == nil || !strings.Contains(err.Error(), "must be the name of a LocalQueue") {
		t.Fatalf("error = %v, want the queue name refused", err)
	}
}

// TestSamples: the shipped samples are jobs berth queues, with the gangs
// their comments describe.
func TestSamples(t *testing.T) {
	for _, tc := range []struct {
		file string
		kind jobs.Kind
		want string
	}{
		{file: "pytorchjob.yaml", kind: PyTorchJobKind{}, want: "master:1 worker:3"},
		{file: "mpijob.yaml", kind: MPIJobKind{}, want: "launcher:1 worker:2"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("../../../config/samples/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			obj := tc.kind.NewObject()
			if err := yaml.UnmarshalStrict(data, obj); err != nil {
				t.Fatalf("decoding the sample: %v", err)
			}
			sets, err := tc.kind.Wrap(obj).PodSets()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ps := range sets {
				got = append(got, fmt.Sprintf("%s:%d", ps.Name, ps.Count))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("pod sets %v, want %s", got, tc.want)
			}
		})
	}
}
