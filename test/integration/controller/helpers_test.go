package controller_test

import (
	"context"
	"fmt"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// workloadOf returns the Workload owned by the job, or an error while there
// is none.
func workloadOf(ctx context.Context, job *batchv1.Job) (*berthv1.Workload, error) {
	wls := &berthv1.WorkloadList{}
	if err := env.Client.List(ctx, wls, client.InNamespace(job.Namespace)); err != nil {
		return nil, err
	}
	for i := range wls.Items {
		if ref := metav1.GetControllerOf(&wls.Items[i]); ref != nil && ref.UID == job.UID {
			return &wls.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no workload for job %s yet", job.Name)
}

// condition returns the workload's condition of the type, or nil.
func condition(wl *berthv1.Workload, t string) *metav1.Condition {
	return meta.FindStatusCondition(wl.Status.Conditions, t)
}

// suspended reports whether the job is suspended, reading it fresh.
func suspended(ctx context.Context, job *batchv1.Job) func(Gomega) bool {
	return func(g Gomega) bool {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		return ptr.Deref(fresh.Spec.Suspend, false)
	}
}

// eventReasons lists the reasons of events about the object.
func eventReasons(ctx context.Context, namespace, name string) func(Gomega) []string {
	return func(g Gomega) []string {
		evs := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace(namespace))).To(Succeed())
		var out []string
		for _, e := range evs.Items {
			if e.Regarding.Name == name {
				out = append(out, e.Reason+": "+e.Note)
			}
		}
		return out
	}
}
