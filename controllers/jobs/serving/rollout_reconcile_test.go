package serving

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/pods"
)

// explainer answers Explain with one reason for every workload.
type explainer admission.PendingReason

func (e explainer) Explain(admission.WorkloadKey) (admission.Explanation, bool) {
	return admission.Explanation{Reason: admission.PendingReason(e)}, e != ""
}

// TestRolloutsReconcile: at full quota the controller marks the waiting
// surge pod and deletes one old replica, whether the surge pod waits with a
// Workload or in the engine alone; when the engine does not say the surge
// pod waits for quota it deletes nothing and looks again later.
func TestRolloutsReconcile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reason    admission.PendingReason
		workload  bool
		swapped   bool
		requeuing bool
	}{
		{name: "the engine says the surge pod waits for quota", reason: admission.InsufficientQuota, workload: true, swapped: true},
		{name: "the surge pod waits behind the queue's head", reason: admission.BlockedByHead, workload: true, requeuing: true},
		{name: "the surge pod waits for quota in the engine, without a Workload", reason: admission.InsufficientQuota, swapped: true},
		{name: "the surge pod is not in the engine yet", requeuing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d1",
				Labels: queued, Annotations: map[string]string{revisionAnnotation: "2"}}}
			old, nw := rs("old", "rs1", "d1", "1"), rs("new", "rs2", "d1", "2")
			old.Namespace, nw.Namespace = "ns", "ns"
			donor, surge := replicaPod("old-a", "rs1", 1, false, true), replicaPod("new-a", "rs2", 10, true, false)
			donor.Namespace, surge.Namespace = "ns", "ns"
			donor.UID, surge.UID = "u-old", "u-new"
			objs := []client.Object{d, &old, &nw, &donor, &surge}
			if tc.workload {
				objs = append(objs, &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
					Name: jobs.KeyWorkloadName(pods.DeploymentKind, "ns", surge.Name)}})
			}
			c := fakeClient(objs...)
			r := NewRollouts(c, explainer(tc.reason), events.NewFakeRecorder(4))
			res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}})
			if err != nil {
				t.Fatal(err)
			}
			gone := apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(&donor), &corev1.Pod{}))
			marked := &corev1.Pod{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(&surge), marked); err != nil {
				t.Fatal(err)
			}
			if gone != tc.swapped || (marked.Annotations[berthv1.SwapAnnotation] == donor.Name) != tc.swapped {
				t.Errorf("donor deleted %v, surge marked %v; want both %v", gone, marked.Annotations, tc.swapped)
			}
			if (res.RequeueAfter > 0) != tc.requeuing {
				t.Errorf("requeue after %v, want requeuing %v", res.RequeueAfter, tc.requeuing)
			}
		})
	}
}
