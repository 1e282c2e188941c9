package headroom

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
)

// placeholderWorld is a serving queue with one headroom pool, a queued
// Deployment of one 4-GPU replica that tolerates the headroom, and a
// policy of two replicas.
func placeholderWorld() []client.Object {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	tpl := gpuPod("4")
	tpl.Spec.Tolerations = []corev1.Toleration{{Key: berthv1.HeadroomLabel, Operator: corev1.TolerationOpExists}}
	return []client.Object{
		queueOf("16", ""),
		&berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "serving"}, Spec: berthv1.LocalQueueSpec{ClusterQueue: "serving"}},
		&berthv1.CapacityPool{ObjectMeta: metav1.ObjectMeta{Name: "headroom"}, Spec: berthv1.CapacityPoolSpec{Flavor: "h200", MaxNodes: 2,
			NodeTemplate: berthv1.NodeTemplate{Labels: map[string]string{berthv1.HeadroomLabel: "serving"}, Allocatable: corev1.ResourceList{gpu: resource.MustParse("8")}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "chat", Labels: map[string]string{berthv1.QueueNameLabel: "serving"}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Template: tpl}},
		&berthv1.HeadroomPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "chat"}, Spec: berthv1.HeadroomPolicySpec{
			TargetRef: berthv1.HeadroomTarget{Kind: "Deployment", Name: "chat"},
			Sizing:    berthv1.HeadroomSizing{Mode: berthv1.HeadroomFixed, Replicas: ptr.To[int32](2)}}},
	}
}

// TestReconcileSaysWhyItKeepsNothing: a placeholder Deployment the API
// server refuses is said on the policy (KeepFailed, with the reason) and
// looked at again; a conflict is an error, retried at once; once the
// writes go through, the placeholders are there and the policy is Kept.
func TestReconcileSaysWhyItKeepsNothing(t *testing.T) {
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "serving", Name: "chat"}}
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "x", errors.New("modified"))
	for _, tc := range []struct {
		name       string
		fail       []fakeapi.Failure
		wantErr    bool
		wantReason string
		wantPods   int32
	}{
		{name: "refused", fail: []fakeapi.Failure{{Verb: fakeapi.Create, Kind: "Deployment"}}, wantReason: "KeepFailed"},
		{name: "conflict", fail: []fakeapi.Failure{{Verb: fakeapi.Create, Kind: "Deployment", Err: conflict}}, wantErr: true},
		{name: "written", wantReason: "Kept", wantPods: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeapi.Failing(fakeapi.New(t, placeholderWorld()...), tc.fail...)
			r := New(c, c, nil, nil, Options{})
			res, err := r.Reconcile(t.Context(), req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile = %v, want an error: %t", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if res.RequeueAfter != Resync {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, Resync)
			}
			var hp berthv1.HeadroomPolicy
			if err := c.Get(t.Context(), req.NamespacedName, &hp); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(hp.Status.Conditions, ConditionReady)
			if ready == nil || ready.Reason != tc.wantReason {
				t.Fatalf("Ready = %+v, want reason %s", ready, tc.wantReason)
			}
			if tc.wantReason == "KeepFailed" && ready.Message == "" {
				t.Error("KeepFailed without a message")
			}
			var list appsv1.DeploymentList
			if err := c.List(t.Context(), &list, client.InNamespace("berth-system")); err != nil {
				t.Fatal(err)
			}
			var pods int32
			for _, d := range list.Items {
				pods += ptr.Deref(d.Spec.Replicas, 0)
			}
			if pods != tc.wantPods {
				t.Errorf("placeholder pods %d, want %d", pods, tc.wantPods)
			}
		})
	}
}
