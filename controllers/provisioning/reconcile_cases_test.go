package provisioning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

func TestReconcileWorkload(t *testing.T) {
	for _, tc := range append(append(inputCases(), createCases()...), answerCases()...) {
		t.Run(tc.name, func(t *testing.T) { runWorkloadCase(t, tc) })
	}
}

// inputCases are workloads the reconciler has nothing to do for, or cannot
// act on yet.
func inputCases() []wlCase {
	return []wlCase{
		{name: "a workload that is gone is no error", objs: []client.Object{h200()}},
		{
			name: "a workload read that fails names the workload", objs: []client.Object{booking(rack()), h200()},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "Workload"}},
			wantErr: "reading workload team-a/job-train-abcde", check: nothingCreated,
		},
		{name: "a workload that books nothing is left alone", objs: []client.Object{booking(rack(), noBooking), h200()}, check: nothingCreated},
		{name: "a workload being deleted is left to the garbage collector", objs: []client.Object{booking(rack(), deletingWL), h200()}, check: nothingCreated},
		{name: "a finished workload is left alone", objs: []client.Object{booking(rack(), finishedWL), h200()}, check: nothingCreated},
		{
			name: "without the API a booking says what to install", unavailable: true, objs: []client.Object{booking(rack()), h200()},
			check: func(t *testing.T, c client.Client, r reports) {
				messageHas(APIMissingMessage)(t, c, r)
				nothingCreated(t, c, r)
				if cnd := lifecycle.Condition(stored(t, c), berthv1.ConditionAdmitted); cnd == nil || cnd.Reason != string(berthv1.ReasonWaitingForCapacity) {
					t.Errorf("Admitted = %+v, want WaitingForCapacity", cnd)
				}
			},
		},
		{
			name: "without the API an unpinned booking's message carries the unpinned note", unavailable: true,
			objs:  []client.Object{booking(nil), h200()},
			check: messageHas(APIMissingMessage + "; unpinned"),
		},
		{
			name: "without the API a started gang is left alone", unavailable: true,
			objs:  []client.Object{booking(rack(), started(now())), h200()},
			check: messageHas("", APIMissingMessage),
		},
		{
			name: "without the API a note that fails to be written is an error", unavailable: true,
			objs:    []client.Object{booking(rack()), h200()},
			fail:    []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch, Kind: "Workload"}},
			wantErr: "NoteBooking on workload team-a/job-train-abcde",
		},
		{
			name: "a booking whose flavor is missing waits for it", objs: []client.Object{booking(rack())},
			wantResult: reconcile.Result{RequeueAfter: flavorRetry}, check: nothingCreated,
		},
		{
			name: "a flavor read that fails is an error, retried", objs: []client.Object{booking(rack()), h200()},
			fail:       []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "ResourceFlavor"}},
			wantResult: reconcile.Result{RequeueAfter: flavorRetry}, wantErr: "reading ResourceFlavor h200", check: nothingCreated,
		},
		{
			name: "a request read that fails is an error that names it", objs: []client.Object{booking(rack()), h200()},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "ProvisioningRequest"}},
			wantErr: "reading ProvisioningRequest team-a/job-train-abcde-2", check: nothingCreated,
		},
		{
			name: "a booking that failed deletes the workload's requests and their templates",
			objs: []client.Object{booking(rack(), gaveUp), h200(), request("job-train-abcde-2", booking(rack())),
				&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: TemplateName("job-train-abcde-2", "leader")}}},
			check: nothingCreated,
		},
		{
			name: "a request list that fails is an error", objs: []client.Object{booking(rack()), h200()},
			fail:    []fakeapi.Failure{{Verb: fakeapi.List, Kind: "ProvisioningRequest"}},
			wantErr: "listing ProvisioningRequests in team-a", check: nothingCreated,
		},
	}
}

// createCases create the attempt's PodTemplates and request.
func createCases() []wlCase {
	waiting := "waiting for ProvisioningRequest job-train-abcde-2"
	return []wlCase{
		{
			name: "a booking creates its templates, then its request, owned by the workload",
			objs: []client.Object{booking(rack()), h200()}, wantAnswers: []admission.Answer{admission.AnswerNone},
			wantEvents: []string{lifecycle.EventRequestCreated},
			check: func(t *testing.T, c client.Client, _ reports) {
				pr := &autoscalingv1.ProvisioningRequest{}
				if !exists(t, c, pr, "job-train-abcde-2") {
					t.Fatal("no ProvisioningRequest created")
				}
				if ref := metav1.GetControllerOf(pr); ref == nil || ref.UID != "wl-uid" {
					t.Errorf("request controller = %+v, want the workload", ref)
				}
				for _, ps := range []string{"leader", "workers"} {
					if !exists(t, c, &corev1.PodTemplate{}, TemplateName("job-train-abcde-2", ps)) {
						t.Errorf("no PodTemplate for pod set %s", ps)
					}
				}
			},
		},
		{
			name:        "a created request replaces the API-missing message of a pinned booking",
			objs:        []client.Object{booking(rack(), withMessage(APIMissingMessage)), h200()},
			wantAnswers: []admission.Answer{admission.AnswerNone}, wantEvents: []string{lifecycle.EventRequestCreated},
			check: messageHas(waiting, APIMissingMessage),
		},
		{
			// NoteBooking appends the unpinned note, so the stored
			// message is longer than APIMissingMessage.
			name:        "a created request replaces the API-missing message of an unpinned booking",
			objs:        []client.Object{booking(nil, withMessage(APIMissingMessage)), h200()},
			wantAnswers: []admission.Answer{admission.AnswerNone}, wantEvents: []string{lifecycle.EventRequestCreated},
			check: messageHas(waiting, APIMissingMessage),
		},
		{
			name:        "a created request leaves any other message to the answers",
			objs:        []client.Object{booking(rack(), withMessage("reserved")), h200()},
			wantAnswers: []admission.Answer{admission.AnswerNone}, wantEvents: []string{lifecycle.EventRequestCreated},
			check: messageHas("reserved"),
		},
		{
			name:    "a template create that fails is an error and no request is made",
			objs:    []client.Object{booking(rack()), h200()},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Create, Kind: "PodTemplate"}},
			wantErr: "creating PodTemplate team-a/" + TemplateName("job-train-abcde-2", "leader"), check: nothingCreated,
		},
		{
			name: "a template planted under the attempt's name fails the attempt",
			objs: []client.Object{booking(rack()), h200(),
				&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: TemplateName("job-train-abcde-2", "leader")}}},
			wantAnswers: []admission.Answer{admission.AnswerFailed}, wantEvents: []string{lifecycle.EventRequestSquatted},
			check: func(t *testing.T, c client.Client, _ reports) {
				if exists(t, c, &autoscalingv1.ProvisioningRequest{}, "job-train-abcde-2") {
					t.Error("a request was created over a planted template")
				}
			},
		},
		{
			name:        "a template of an earlier reconcile is reused",
			objs:        []client.Object{booking(rack()), h200(), ownedTemplate("leader")},
			wantAnswers: []admission.Answer{admission.AnswerNone}, wantEvents: []string{lifecycle.EventRequestCreated},
			check: func(t *testing.T, c client.Client, _ reports) {
				if !exists(t, c, &autoscalingv1.ProvisioningRequest{}, "job-train-abcde-2") {
					t.Error("no request created")
				}
			},
		},
		{
			name:    "a request create that fails is an error and nothing is reported",
			objs:    []client.Object{booking(rack()), h200()},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Create, Kind: "ProvisioningRequest"}},
			wantErr: "creating ProvisioningRequest team-a/job-train-abcde-2",
		},
		{
			name: "a request another reconcile created is no error",
			objs: []client.Object{booking(rack()), h200()},
			fail: []fakeapi.Failure{{Verb: fakeapi.Create, Kind: "ProvisioningRequest", Err: alreadyExists()}},
		},
	}
}

// answerCases report the autoscaler's answers.
func answerCases() []wlCase {
	wl := booking(rack())
	name := "job-train-abcde-2"
	admittedAt := now().Add(-time.Minute)
	return []wlCase{
		{
			name: "a request without an answer is reported as such", objs: []client.Object{booking(rack()), h200(), request(name, wl)},
			wantAnswers: []admission.Answer{admission.AnswerNone},
		},
		{
			name:        "a provisioned request is reported",
			objs:        []client.Object{booking(rack()), h200(), request(name, wl, prCond(autoscalingv1.Provisioned, metav1.ConditionTrue, "Provisioned", "ok"))},
			wantAnswers: []admission.Answer{admission.AnswerProvisioned},
		},
		{
			name: "a provisioned request of a gang that must fit one new node is reported, and the Workload says it waits for the node",
			objs: []client.Object{booking(oneNewNode(), onePool), h200(),
				request(name, wl, prCond(autoscalingv1.Provisioned, metav1.ConditionTrue, "Provisioned", "ok"))},
			wantAnswers: []admission.Answer{admission.AnswerProvisioned},
			check:       messageHas("ProvisioningRequest job-train-abcde-2 is provisioned; the gang must fit one node and starts once the new node of CapacityPool big-r2 joined"),
		},
		{
			name:        "a failed request is reported",
			objs:        []client.Object{booking(rack()), h200(), request(name, wl, prCond(autoscalingv1.Failed, metav1.ConditionTrue, "Failed", "quota"))},
			wantAnswers: []admission.Answer{admission.AnswerFailed},
		},
		{
			name: "no capacity is reported and its first sighting recorded",
			objs: []client.Object{booking(rack()), h200(), request(name, wl,
				prCond(autoscalingv1.Provisioned, metav1.ConditionFalse, lifecycle.CapacityIsNotFound, "no room"))},
			wantAnswers: []admission.Answer{admission.AnswerCapacityNotFound},
			check: func(t *testing.T, c client.Client, r reports) {
				p := stored(t, c).Status.Provisioning
				if p.CapacityNotFoundSince == nil || !p.CapacityNotFoundSince.Time.Equal(now()) {
					t.Errorf("capacityNotFoundSince = %v, want %v", p.CapacityNotFoundSince, now())
				}
				messageHas("the autoscaler found no capacity for job-train-abcde-2 in")(t, c, r)
			},
		},
		{
			name: "a no-capacity note that fails to be written is an error, not reported",
			objs: []client.Object{booking(rack()), h200(), request(name, wl,
				prCond(autoscalingv1.Provisioned, metav1.ConditionFalse, lifecycle.CapacityIsNotFound, "no room"))},
			fail:    []fakeapi.Failure{{Verb: fakeapi.SubResourcePatch, Kind: "Workload"}},
			wantErr: "NoteBooking on workload",
		},
		{
			name:        "a request berth did not create fails the attempt with a warning",
			objs:        []client.Object{booking(rack()), h200(), request(name, nil)},
			wantAnswers: []admission.Answer{admission.AnswerFailed}, wantEvents: []string{lifecycle.EventRequestSquatted},
		},
		{
			name:       "a request of a deleted namesake waits for the garbage collector",
			objs:       []client.Object{booking(rack()), h200(), request(name, namesake())},
			wantResult: reconcile.Result{RequeueAfter: flavorRetry},
		},
		{
			name: "an earlier attempt's request and templates are deleted, the current one kept",
			objs: []client.Object{booking(rack()), h200(), request(name, wl), request("job-train-abcde-1", wl),
				&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: TemplateName("job-train-abcde-1", "leader")}}},
			wantAnswers: []admission.Answer{admission.AnswerNone},
			check: func(t *testing.T, c client.Client, _ reports) {
				if exists(t, c, &autoscalingv1.ProvisioningRequest{}, "job-train-abcde-1") ||
					exists(t, c, &corev1.PodTemplate{}, TemplateName("job-train-abcde-1", "leader")) {
					t.Error("attempt 1's request or template is still there")
				}
				if !exists(t, c, &autoscalingv1.ProvisioningRequest{}, name) {
					t.Error("the current request was deleted")
				}
			},
		},
		{
			name:    "a request delete that fails is an error that names it",
			objs:    []client.Object{booking(rack()), h200(), request("job-train-abcde-1", wl)},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Delete, Kind: "ProvisioningRequest"}},
			wantErr: "deleting ProvisioningRequest team-a/job-train-abcde-1",
		},
		{
			name:    "a template delete that fails is an error that names it",
			objs:    []client.Object{booking(rack()), h200(), request("job-train-abcde-1", wl)},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Delete, Kind: "PodTemplate"}},
			wantErr: "deleting PodTemplate team-a/" + TemplateName("job-train-abcde-1", "leader"),
		},
		{
			name: "a started gang's revoked request is reported",
			objs: []client.Object{booking(rack(), started(admittedAt)), h200(), request(name, wl,
				prCond(autoscalingv1.CapacityRevoked, metav1.ConditionTrue, "Revoked", "gone"))},
			wantAnswers: []admission.Answer{admission.AnswerRevoked},
		},
		{
			name: "a started gang's expired request is consumed when a pod was bound on it",
			objs: []client.Object{booking(rack(), started(admittedAt)), h200(), gangPod("p0", name, "node-1", false),
				request(name, wl, prCond(autoscalingv1.BookingExpired, metav1.ConditionTrue, "Expired", ""))},
			wantAnswers: []admission.Answer{admission.AnswerExpired},
			check:       wantConsumed(true),
		},
		{
			name: "a started gang's expired request is unused when no pod was bound",
			objs: []client.Object{booking(rack(), started(admittedAt)), h200(), gangPod("p0", name, "", false),
				request(name, wl, prCond(autoscalingv1.BookingExpired, metav1.ConditionTrue, "Expired", ""))},
			wantAnswers: []admission.Answer{admission.AnswerExpired},
			check:       wantConsumed(false),
		},
		{
			name: "a pod list that fails for an expired request is an error",
			objs: []client.Object{booking(rack(), started(admittedAt)), h200(),
				request(name, wl, prCond(autoscalingv1.BookingExpired, metav1.ConditionTrue, "Expired", ""))},
			fail:    []fakeapi.Failure{{Verb: fakeapi.List, Kind: "Pod"}},
			wantErr: "listing the pods of workload job-train-abcde",
		},
		{
			name:       "a started gang is looked at again at its pods-ready deadline",
			objs:       []client.Object{booking(rack(), started(admittedAt)), flavor(300)},
			wantResult: reconcile.Result{RequeueAfter: 4 * time.Minute},
		},
		{
			name: "a started gang without podsReadySeconds is not checked",
			objs: []client.Object{booking(rack(), started(now().Add(-time.Hour))), flavor(0)},
		},
		{
			name: "a gang whose pods were all Ready at the deadline is counted for the engine, which records it",
			objs: []client.Object{booking(rack(), started(now().Add(-time.Hour))), flavor(60),
				gangPod("p0", name, "n", true), gangPod("p1", name, "n", true), gangPod("p2", name, "n", true), gangPod("p3", name, "n", true)},
			wantAnswers: []admission.Answer{admission.AnswerPodsCounted},
			check:       wantCounted(4, now().Add(-time.Hour).Add(time.Minute)),
		},
		{
			name: "a gang whose pods were not all Ready at the deadline is counted for the engine, which evicts it",
			objs: []client.Object{booking(rack(), started(now().Add(-time.Hour))), flavor(60),
				gangPod("p0", name, "n", true), gangPod("p1", name, "n", false)},
			wantAnswers: []admission.Answer{admission.AnswerPodsCounted},
			check:       wantCounted(1, now().Add(-time.Hour).Add(time.Minute)),
		},
	}
}

func wantConsumed(want bool) func(*testing.T, client.Client, reports) {
	return func(t *testing.T, _ client.Client, r reports) {
		t.Helper()
		if len(r) != 1 || r[0].Consumed != want {
			t.Errorf("reports = %+v, want one with Consumed=%v", r, want)
		}
	}
}

// ownedTemplate is attempt 2's template of podSet, created by an earlier
// reconcile.
func ownedTemplate(podSet string) *corev1.PodTemplate {
	return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: TemplateName("job-train-abcde-2", podSet),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: berthv1.GroupVersion.String(), Kind: "Workload",
			Name: "job-train-abcde", UID: "wl-uid", Controller: func() *bool { b := true; return &b }()}}}}
}

// namesake is an earlier Workload of the same name.
func namesake() *berthv1.Workload {
	wl := booking(rack())
	wl.UID = "earlier-uid"
	return wl
}

// wantCounted checks the count of Ready pods reported at the deadline, and
// that the reconciler wrote nothing: the engine decides, and the scheduler
// writes PodsReady or the eviction.
func wantCounted(ready int32, deadline time.Time) func(*testing.T, client.Client, reports) {
	return func(t *testing.T, c client.Client, r reports) {
		t.Helper()
		got := r[0]
		if got.Ready != ready || got.Deadline != deadline.UnixNano() || got.ReadySeconds != 60 {
			t.Errorf("report = %d Ready, deadline %d, %d s; want %d, %d, 60 s", got.Ready, got.Deadline, got.ReadySeconds, ready, deadline.UnixNano())
		}
		if ph := lifecycle.PhaseOf(stored(t, c)); ph != lifecycle.Admitted {
			t.Errorf("phase = %s, want Admitted: the reconciler writes no decision", ph)
		}
	}
}
