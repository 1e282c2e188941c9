package lifecycle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// TestRecordOf: a record is counted only on a live, released pod whose
// workload label is its own UID, in the pod's own queue, and complete.
func TestRecordOf(t *testing.T) {
	good := Record{Workload: "deployment-web-a-12345", Spec: berthv1.WorkloadSpec{QueueName: "team",
		PodSets: []berthv1.PodSet{{Name: "main", Count: 1}}}, Admission: berthv1.Admission{ClusterQueue: "cq"}}
	pod := func(r *Record, edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-a", UID: "uid",
			Labels: map[string]string{berthv1.QueueNameLabel: "team", berthv1.WorkloadLabel: "uid"}}}
		if r != nil {
			enc, err := EncodeRecord(*r)
			if err != nil {
				t.Fatal(err)
			}
			p.Annotations = map[string]string{berthv1.AdmissionRecordAnnotation: enc}
		}
		if edit != nil {
			edit(p)
		}
		return p
	}
	other := good
	other.Spec.QueueName = "elsewhere"
	empty := good
	empty.Admission.ClusterQueue = ""
	tests := []struct {
		name    string
		pod     *corev1.Pod
		has     bool
		wantErr string
	}{
		{name: "no record", pod: pod(nil, nil)},
		{name: "a trusted record", pod: pod(&good, nil), has: true},
		{name: "not JSON", pod: pod(&good, func(p *corev1.Pod) { p.Annotations[berthv1.AdmissionRecordAnnotation] = "{" }), has: true, wantErr: "is not a record"},
		{name: "on a gated pod", pod: pod(&good, func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
		}), has: true, wantErr: "is gated"},
		{name: "labelled with another UID", pod: pod(&good, func(p *corev1.Pod) { p.Labels[berthv1.WorkloadLabel] = "wl-uid" }), has: true, wantErr: "not its own UID"},
		{name: "of another queue", pod: pod(&other, nil), has: true, wantErr: "another queue"},
		{name: "without a ClusterQueue", pod: pod(&empty, nil), has: true, wantErr: "incomplete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, has, err := RecordOf(tt.pod)
			if has != tt.has {
				t.Fatalf("has = %v, want %v", has, tt.has)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			case tt.wantErr == "" && has && (r == nil || r.Workload != good.Workload):
				t.Fatalf("record = %+v, want %+v", r, good)
			}
		})
	}
}
