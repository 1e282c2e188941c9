package provisioning

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
)

// discoveryAnswer is a fixed discovery answer for autoscaling.x-k8s.io/v1.
type discoveryAnswer struct {
	resources []string
	err       error
}

func (d discoveryAnswer) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if d.err != nil {
		return nil, d.err
	}
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range d.resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
	}
	return l, nil
}

func crd(deleting bool) *metav1.PartialObjectMetadata {
	o := crdObject()
	o.Name = CRDName
	if deleting {
		o.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		o.Finalizers = []string{"customresourcecleanup.apiextensions.k8s.io"}
	}
	return o
}

func TestAPIReconcile(t *testing.T) {
	served := discoveryAnswer{resources: []string{"provisioningrequests", "provisioningrequests/status"}}
	gone := discoveryAnswer{err: apierrors.NewNotFound(schema.GroupResource{Group: autoscalingv1.SchemeGroupVersion.Group}, "v1")}
	cases := []struct {
		name           string
		objs           []client.Object
		disc           discoveryAnswer
		was            bool
		onAvailableErr error
		fail           []fakeapi.Failure
		wantResult     reconcile.Result
		wantErr        string
		wantAvailable  bool
		wantNotified   int
	}{
		{name: "a CRD that is served makes the API available and re-reconciles what it concerns",
			objs: []client.Object{crd(false)}, disc: served, wantAvailable: true, wantNotified: 1},
		{name: "an API already known to be served notifies nobody",
			objs: []client.Object{crd(false)}, disc: served, was: true, wantAvailable: true},
		{name: "no CRD and no API: nothing changes", disc: gone},
		{name: "a CRD not served yet is looked at again soon",
			objs: []client.Object{crd(false)}, disc: gone, wantResult: reconcile.Result{RequeueAfter: settleRetry}},
		{name: "a CRD being deleted while still served is looked at again soon",
			objs: []client.Object{crd(true)}, disc: served, was: true, wantAvailable: true,
			wantResult: reconcile.Result{RequeueAfter: settleRetry}},
		{name: "an API that went away is reported to what it concerns",
			disc: gone, was: true, wantNotified: 1},
		{name: "a group served without provisioningrequests is not the API",
			objs: []client.Object{crd(false)}, disc: discoveryAnswer{resources: []string{"other"}},
			wantResult: reconcile.Result{RequeueAfter: settleRetry}},
		{name: "a discovery error is an error that names the group",
			objs: []client.Object{crd(false)}, disc: discoveryAnswer{err: errors.New("timeout")}, was: true,
			wantErr: "discovering autoscaling.x-k8s.io/v1", wantAvailable: true},
		{name: "a CRD read that fails is an error that names the CRD",
			disc: served, fail: []fakeapi.Failure{{Verb: fakeapi.Get}}, wantErr: "reading CRD " + CRDName},
		{name: "a watch that cannot start is an error",
			objs: []client.Object{crd(false)}, disc: served, onAvailableErr: errors.New("no informer"),
			wantErr: "no informer", wantAvailable: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeapi.Failing(fakeapi.New(t, tc.objs...), tc.fail...)
			ch := make(chan event.GenericEvent, 4)
			state := &apiState{available: tc.was, watching: tc.was, changed: []chan event.GenericEvent{ch},
				onAvailable: func() error { return tc.onAvailableErr }}
			concerned := []client.Object{h200()}
			r := &apiReconciler{client: c, discovery: tc.disc, state: state,
				all: func(context.Context) []client.Object { return concerned }}
			res, err := r.Reconcile(t.Context(), reconcile.Request{})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if res != tc.wantResult {
				t.Errorf("result = %+v, want %+v", res, tc.wantResult)
			}
			if state.Available() != tc.wantAvailable {
				t.Errorf("available = %v, want %v", state.Available(), tc.wantAvailable)
			}
			if len(ch) != tc.wantNotified {
				t.Errorf("%d objects notified, want %d", len(ch), tc.wantNotified)
			}
		})
	}
}

func TestFlavorReconcile(t *testing.T) {
	withCondition := func(status metav1.ConditionStatus, reason, msg string) *berthv1.ResourceFlavor {
		rf := h200()
		rf.Status.Conditions = []metav1.Condition{{Type: berthv1.ConditionProvisioningAvailable, Status: status, Reason: reason,
			Message: msg, LastTransitionTime: metav1.Unix(1, 0)}}
		return rf
	}
	noPolicy := func(rf *berthv1.ResourceFlavor) *berthv1.ResourceFlavor { rf.Spec.Provisioning = nil; return rf }
	cases := []struct {
		name        string
		objs        []client.Object
		available   bool
		fail        []fakeapi.Failure
		wantErr     string
		wantStatus  metav1.ConditionStatus // empty: no condition
		wantReason  string
		wantWritten bool
	}{
		{name: "a flavor that is gone is no error"},
		{name: "a flavor read that fails names the flavor", objs: []client.Object{h200()},
			fail: []fakeapi.Failure{{Verb: fakeapi.Get}}, wantErr: "reading ResourceFlavor h200"},
		{name: "a flavor with a policy is told the API is served", objs: []client.Object{h200()}, available: true,
			wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonAPIAvailable, wantWritten: true},
		{name: "a flavor with a policy is told what to install", objs: []client.Object{h200()},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonAPINotInstalled, wantWritten: true},
		{name: "a flavor told already is not written again",
			objs:       []client.Object{withCondition(metav1.ConditionFalse, berthv1.ReasonAPINotInstalled, APIMissingMessage)},
			wantStatus: metav1.ConditionFalse, wantReason: berthv1.ReasonAPINotInstalled},
		{name: "a flavor told the API is missing is told when it is served",
			objs:      []client.Object{withCondition(metav1.ConditionFalse, berthv1.ReasonAPINotInstalled, APIMissingMessage)},
			available: true, wantStatus: metav1.ConditionTrue, wantReason: berthv1.ReasonAPIAvailable, wantWritten: true},
		{name: "a flavor without a policy has no condition", objs: []client.Object{noPolicy(h200())}, available: true},
		{name: "a flavor whose policy was removed loses the condition",
			objs:        []client.Object{noPolicy(withCondition(metav1.ConditionTrue, berthv1.ReasonAPIAvailable, "served"))},
			wantWritten: true},
		{name: "a status write that fails names the flavor", objs: []client.Object{h200()},
			fail: []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch}}, wantErr: "writing ProvisioningAvailable of ResourceFlavor h200"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := fakeapi.New(t, tc.objs...)
			r := &flavorReconciler{client: fakeapi.Failing(base, tc.fail...), state: availability(tc.available)}
			res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "h200"}})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if res != (reconcile.Result{}) {
				t.Errorf("result = %+v, want none", res)
			}
			if len(tc.objs) == 0 || tc.wantErr != "" {
				return
			}
			rf := &berthv1.ResourceFlavor{}
			if err := base.Get(t.Context(), client.ObjectKey{Name: "h200"}, rf); err != nil {
				t.Fatal(err)
			}
			if written := rf.ResourceVersion != "999"; written != tc.wantWritten {
				t.Errorf("written = %v (resourceVersion %s), want %v", written, rf.ResourceVersion, tc.wantWritten)
			}
			cnd := meta.FindStatusCondition(rf.Status.Conditions, berthv1.ConditionProvisioningAvailable)
			switch {
			case tc.wantStatus == "" && cnd != nil:
				t.Errorf("condition = %+v, want none", cnd)
			case tc.wantStatus != "" && (cnd == nil || cnd.Status != tc.wantStatus || cnd.Reason != tc.wantReason):
				t.Errorf("condition = %+v, want %s/%s", cnd, tc.wantStatus, tc.wantReason)
			}
		})
	}
}
