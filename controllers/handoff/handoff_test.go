package handoff

import (
	"context"
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func group(berths bool, placed metav1.ConditionStatus) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-train-1a2b3"},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}}},
	}
	if berths {
		pg.Labels = map[string]string{berthv1.WorkloadLabel: "wl-uid"}
	}
	if placed != "" {
		pg.Status.Conditions = []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: placed, Reason: "Scheduled"}}
	}
	return pg
}

func TestReconcile(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pg   *schedulingv1beta1.PodGroup
		want int32
	}{
		{"a placed gang of berth's no longer waits for a whole gang", group(true, metav1.ConditionTrue), 1},
		{"a gang not placed yet stays whole", group(true, metav1.ConditionFalse), 4},
		{"a gang kube-scheduler has not tried stays whole", group(true, ""), 4},
		{"a PodGroup berth did not make is left alone", group(false, metav1.ConditionTrue), 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.pg).WithStatusSubresource(tc.pg).Build()
			key := client.ObjectKeyFromObject(tc.pg)
			if _, err := New(c).Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			got := &schedulingv1beta1.PodGroup{}
			if err := c.Get(context.Background(), key, got); err != nil {
				t.Fatal(err)
			}
			if n := got.Spec.SchedulingPolicy.Gang.MinCount; n != tc.want {
				t.Errorf("minCount %d, want %d", n, tc.want)
			}
			if NeedsRelaxing(got) {
				t.Errorf("still needs relaxing after its reconcile")
			}
		})
	}
	// A group deleted before its reconcile is no error.
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	if _, err := New(c).Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team", Name: "gone"}}); err != nil {
		t.Errorf("reconciling a deleted group: %v", err)
	}
}
