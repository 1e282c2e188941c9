package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
)

// TestUnchangedWorkloadNotFedAgain checks which Workload events reach the
// engine: one that changed what the engine reads is converted and asks for
// a cycle; one that changed something else is neither.
func TestUnchangedWorkloadNotFedAgain(t *testing.T) {
	q := lifecycle.QueueRef{ClusterQueue: "cq", LocalQueueWeight: 1000}
	cases := []struct {
		name   string
		change func(*berthv1.Workload, *lifecycle.QueueRef, *Scheduler)
		fed    bool
	}{
		{name: "nothing", change: func(*berthv1.Workload, *lifecycle.QueueRef, *Scheduler) {}},
		{name: "a pending reason written", change: func(wl *berthv1.Workload, _ *lifecycle.QueueRef, _ *Scheduler) {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: berthv1.ConditionQuotaReserved,
				Status: metav1.ConditionFalse, Reason: string(berthv1.ReasonPending), Message: "waiting"})
		}},
		{name: "a finalizer and a label", change: func(wl *berthv1.Workload, _ *lifecycle.QueueRef, _ *Scheduler) {
			wl.Finalizers = append(wl.Finalizers, "other")
			wl.Labels = map[string]string{"a": "b"}
		}},
		{name: "the spec (a new generation)", change: func(wl *berthv1.Workload, _ *lifecycle.QueueRef, _ *Scheduler) {
			wl.Generation++
		}, fed: true},
		{name: "an admission", change: func(wl *berthv1.Workload, _ *lifecycle.QueueRef, _ *Scheduler) {
			wl.Status.Admission = &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{
				Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "cpu"}}}}
		}, fed: true},
		{name: "a booking record", change: func(wl *berthv1.Workload, _ *lifecycle.QueueRef, _ *Scheduler) {
			wl.Status.Provisioning = &berthv1.ProvisioningStatus{Attempt: 1}
		}, fed: true},
		{name: "PodsReady", change: func(wl *berthv1.Workload, _ *lifecycle.QueueRef, _ *Scheduler) {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: berthv1.ConditionPodsReady,
				Status: metav1.ConditionTrue, Reason: "Ready", Message: "ready"})
		}, fed: true},
		{name: "an eviction written", change: func(wl *berthv1.Workload, _ *lifecycle.QueueRef, _ *Scheduler) {
			wl.Status.Admission = &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{
				Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "cpu"}}}}
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: berthv1.ConditionEvicted,
				Status: metav1.ConditionTrue, Reason: string(berthv1.ReasonDeactivated), Message: "deactivated"})
		}, fed: true},
		{name: "its LocalQueue stopped", change: func(_ *berthv1.Workload, q *lifecycle.QueueRef, _ *Scheduler) {
			q.LocalQueueState = admission.LocalQueueHold
		}, fed: true},
		{name: "its LocalQueue's weight", change: func(_ *berthv1.Workload, q *lifecycle.QueueRef, _ *Scheduler) {
			q.LocalQueueWeight = 2000
		}, fed: true},
		{name: "recreated under the same name", change: func(wl *berthv1.Workload, _ *lifecycle.QueueRef, _ *Scheduler) {
			wl.UID = "other-uid"
		}, fed: true},
		{name: "a rollback in between", change: func(_ *berthv1.Workload, _ *lifecycle.QueueRef, s *Scheduler) {
			s.undo(admission.WorkloadKey{Namespace: "ns", Name: "wl"})
		}, fed: true},
		{name: "a booking report in between", change: func(_ *berthv1.Workload, _ *lifecycle.QueueRef, s *Scheduler) {
			s.ReportBooking(admission.WorkloadKey{Namespace: "ns", Name: "wl"}, admission.BookingReport{})
		}, fed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeapi.New(t)
			s, err := New(c, c, &fakeapi.Recorder{}, Options{Metrics: metrics.New()})
			if err != nil {
				t.Fatal(err)
			}
			wl := &berthv1.Workload{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", UID: "uid", Generation: 1},
				Spec: berthv1.WorkloadSpec{QueueName: "lq", PodSets: []berthv1.PodSet{{Name: "main", Count: 1,
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			}
			if err := s.UpsertWorkload(wl, q); err != nil {
				t.Fatal(err)
			}
			<-s.wake
			wl, q := wl.DeepCopy(), q
			tc.change(wl, &q, s)
			drain(s.wake)
			if err := s.UpsertWorkload(wl, q); err != nil {
				t.Fatal(err)
			}
			if fed := len(s.wake) == 1; fed != tc.fed {
				t.Errorf("the engine was fed again: %v, want %v", fed, tc.fed)
			}
		})
	}
}

func drain(c chan struct{}) {
	for len(c) > 0 {
		<-c
	}
}
