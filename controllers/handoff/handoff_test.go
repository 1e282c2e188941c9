package handoff

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

const groupName = "job-train-1a2b3"

func group(berths bool, placed metav1.ConditionStatus) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: groupName},
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

// jobGroup is the group the Job controller made for job, placed once.
func jobGroup(job *batchv1.Job) *schedulingv1beta1.PodGroup {
	pg := group(false, metav1.ConditionTrue)
	pg.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
	return pg
}

// gangJob is a Job that asks for a gang of 4, queued by berth when queued.
func gangJob(queued bool) *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: "job-uid", Labels: map[string]string{}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{berthv1.WorkloadLabel: "wl-uid"}}},
			Scheduling: &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](4)}}}}}
	if queued {
		job.Labels[berthv1.QueueNameLabel] = "team"
	}
	return job
}

// pods are n pods of Workload wl-uid in the group, bound when bound is set.
func pods(n int, bound bool) []client.Object {
	var out []client.Object
	for i := range n {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("train-%d", i), Labels: map[string]string{berthv1.WorkloadLabel: "wl-uid"}},
			Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(groupName)}}}
		if bound {
			p.Spec.NodeName = "h200-0"
		}
		out = append(out, p)
	}
	return out
}

func TestReconcile(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		pg       *schedulingv1beta1.PodGroup
		objs     []client.Object
		want     int32 // the group's minCount after the reconcile
		wantJob  int32 // the Job's gang minCount after the reconcile, when there is a Job
		requeued bool
	}{
		{name: "a placed gang of berth's no longer waits for a whole gang", pg: group(true, metav1.ConditionTrue), objs: pods(4, true), want: 1},
		{name: "a group placed once whose next run is not bound yet stays whole, and is looked at again", pg: group(true, metav1.ConditionTrue),
			objs: append(pods(2, true)[:1], pods(4, false)[1:]...), want: 4, requeued: true},
		{name: "a gang not placed yet stays whole", pg: group(true, metav1.ConditionFalse), objs: pods(4, true), want: 4},
		{name: "a gang kube-scheduler has not tried stays whole", pg: group(true, ""), want: 4},
		{name: "a PodGroup berth did not make is left alone", pg: group(false, metav1.ConditionTrue), objs: pods(4, true), want: 4},
		{name: "a queued Job's placed gang is lowered in the Job's spec", pg: jobGroup(gangJob(true)),
			objs: append(pods(4, true), gangJob(true)), want: 4, wantJob: 1},
		{name: "a queued Job's gang not bound yet stays whole", pg: jobGroup(gangJob(true)),
			objs: append(pods(4, false), gangJob(true)), want: 4, wantJob: 4, requeued: true},
		{name: "a Job berth does not queue keeps the gang its owner asked for", pg: jobGroup(gangJob(false)),
			objs: append(pods(4, true), gangJob(false)), want: 4, wantJob: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(tc.objs, tc.pg)...).WithStatusSubresource(tc.pg).Build()
			key := client.ObjectKeyFromObject(tc.pg)
			res, err := New(c, c).Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
			if err != nil {
				t.Fatal(err)
			}
			if requeued := res.RequeueAfter > 0; requeued != tc.requeued {
				t.Errorf("requeued %v, want %v", requeued, tc.requeued)
			}
			got := &schedulingv1beta1.PodGroup{}
			if err := c.Get(context.Background(), key, got); err != nil {
				t.Fatal(err)
			}
			if n := got.Spec.SchedulingPolicy.Gang.MinCount; n != tc.want {
				t.Errorf("minCount %d, want %d", n, tc.want)
			}
			if tc.wantJob == 0 {
				return
			}
			job := &batchv1.Job{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: "train"}, job); err != nil {
				t.Fatal(err)
			}
			if n := gangMinCount(job); n != tc.wantJob {
				t.Errorf("the Job's gang minCount %d, want %d", n, tc.wantJob)
			}
		})
	}
	// A group deleted before its reconcile is no error.
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	if _, err := New(c, c).Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team", Name: "gone"}}); err != nil {
		t.Errorf("reconciling a deleted group: %v", err)
	}
}
