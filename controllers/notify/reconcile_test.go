package notify

import (
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
)

// policies records what the reconciler handed the Notifier.
type policies struct {
	set     []string // "key" for a used policy, "-key" for one stopped
	last    Policy
	outcome map[string]DeliveryOutcome
}

func (p *policies) SetPolicy(pol Policy, sink Sink) {
	if sink == nil {
		p.set = append(p.set, "-"+pol.Key)
		return
	}
	p.set, p.last = append(p.set, pol.Key), pol
}

func (p *policies) Outcome(key string) (DeliveryOutcome, bool) {
	o, ok := p.outcome[key]
	return o, ok
}

func eventPolicy() *berthv1.NotificationPolicy {
	np := policy("chat", created, berthv1.SinkEvent)
	np.Spec.Sink.URLSecretRef = nil
	np.Generation = 4
	return np
}

func withReady(np *berthv1.NotificationPolicy, status metav1.ConditionStatus, reason, msg string) *berthv1.NotificationPolicy {
	np.Status.Conditions = append(np.Status.Conditions, metav1.Condition{Type: berthv1.ConditionReady, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: np.Generation, LastTransitionTime: metav1.Unix(1, 0)})
	return np
}

func forbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "hook", nil)
}

// policyCase is one reconcile of team-a's NotificationPolicy "chat".
type policyCase struct {
	name        string
	objs        []client.Object
	outcome     map[string]DeliveryOutcome
	fail        []fakeapi.Failure
	wantErr     string
	wantResult  reconcile.Result
	wantSet     []string
	wantReady   string // Ready's reason; empty: none stored
	wantDeliver string // Delivered's reason; empty: none stored
	wantEvents  []string
	wantWritten bool
}

func TestReconcileNamespacedPolicy(t *testing.T) {
	ready := reconcile.Result{RequeueAfter: reread}
	notReady := reconcile.Result{RequeueAfter: retry}
	noRef := policy("chat", created, berthv1.SinkWebhook)
	noRef.Spec.Sink.URLSecretRef = nil
	cases := []policyCase{
		{name: "a policy that is gone is no longer used", wantSet: []string{"-team-a/chat"}},
		{name: "a read that fails stops the policy and names it", objs: []client.Object{eventPolicy()},
			fail:    []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "NotificationPolicy"}},
			wantErr: "reading NotificationPolicy team-a/chat", wantSet: []string{"-team-a/chat"}},
		{name: "a list that fails names the namespace", objs: []client.Object{eventPolicy()},
			fail: []fakeapi.Failure{{Verb: fakeapi.List, Kind: "NotificationPolicy"}}, wantErr: "listing the NotificationPolicies of team-a"},
		{name: "an event sink is used at once", objs: []client.Object{eventPolicy()}, wantResult: ready,
			wantSet: []string{"team-a/chat"}, wantReady: berthv1.ReasonSinkReady, wantWritten: true},
		{name: "a Ready policy already recorded is not written again",
			objs:       []client.Object{withReady(eventPolicy(), metav1.ConditionTrue, berthv1.ReasonSinkReady, "reports are recorded as Warning events on the jobs")},
			wantResult: ready, wantSet: []string{"team-a/chat"}, wantReady: berthv1.ReasonSinkReady},
		{name: "a missing Secret says what to create and warns once", objs: []client.Object{policy("chat", created, berthv1.SinkWebhook)},
			wantResult: notReady, wantSet: []string{"-team-a/chat"}, wantReady: berthv1.ReasonSecretNotReadable,
			wantEvents: []string{berthv1.ReasonSecretNotReadable}, wantWritten: true},
		{name: "a reason already on record does not warn again",
			objs: []client.Object{withReady(policy("chat", created, berthv1.SinkWebhook), metav1.ConditionFalse, berthv1.ReasonSecretNotReadable,
				`Secret team-a/hook does not exist: create it with the URL under key "url"`)},
			wantResult: notReady, wantSet: []string{"-team-a/chat"}, wantReady: berthv1.ReasonSecretNotReadable},
		{name: "a Secret berth may not read says how to grant it", objs: []client.Object{policy("chat", created, berthv1.SinkWebhook)},
			fail:       []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "Secret", Err: forbidden()}},
			wantResult: notReady, wantSet: []string{"-team-a/chat"}, wantReady: berthv1.ReasonSecretNotReadable,
			wantEvents: []string{berthv1.ReasonSecretNotReadable}, wantWritten: true},
		{name: "a Secret read that fails otherwise is reported on the policy", objs: []client.Object{policy("chat", created, berthv1.SinkWebhook)},
			fail:       []fakeapi.Failure{{Verb: fakeapi.Get, Kind: "Secret"}},
			wantResult: notReady, wantSet: []string{"-team-a/chat"}, wantReady: berthv1.ReasonSecretNotReadable,
			wantEvents: []string{berthv1.ReasonSecretNotReadable}, wantWritten: true},
		{name: "a Secret without the key says which key", objs: []client.Object{policy("chat", created, berthv1.SinkWebhook),
			secretUnderOtherKey()},
			wantResult: notReady, wantSet: []string{"-team-a/chat"}, wantReady: berthv1.ReasonSecretNotReadable,
			wantEvents: []string{berthv1.ReasonSecretNotReadable}, wantWritten: true},
		{name: "a webhook sink without a Secret reference is not used", objs: []client.Object{noRef},
			wantResult: notReady, wantSet: []string{"-team-a/chat"}, wantReady: berthv1.ReasonSecretNotReadable,
			wantEvents: []string{berthv1.ReasonSecretNotReadable}, wantWritten: true},
		{name: "a failed delivery is recorded with a warning",
			objs:       []client.Object{eventPolicy()},
			outcome:    map[string]DeliveryOutcome{"team-a/chat": {Reason: berthv1.ReasonDeliveryFailed, Message: "404"}},
			wantResult: ready, wantSet: []string{"team-a/chat"}, wantReady: berthv1.ReasonSinkReady, wantDeliver: berthv1.ReasonDeliveryFailed,
			wantEvents: []string{berthv1.ReasonDeliveryFailed}, wantWritten: true},
		{name: "a delivery that succeeded is recorded without an event",
			objs:       []client.Object{eventPolicy()},
			outcome:    map[string]DeliveryOutcome{"team-a/chat": {Reason: berthv1.ReasonDelivered, Message: "accepted"}},
			wantResult: ready, wantSet: []string{"team-a/chat"}, wantReady: berthv1.ReasonSinkReady, wantDeliver: berthv1.ReasonDelivered,
			wantWritten: true},
		{name: "a status write that fails names the policy and warns of nothing",
			objs:    []client.Object{policy("chat", created, berthv1.SinkWebhook)},
			fail:    []fakeapi.Failure{{Verb: fakeapi.SubResourceUpdate, Kind: "NotificationPolicy"}},
			wantErr: "writing the conditions of team-a/chat", wantSet: []string{"-team-a/chat"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runPolicyCase(t, tc) })
	}
}

// secretUnderOtherKey is team-a's Secret "hook" with the URL under a key
// the policy does not name.
func secretUnderOtherKey() client.Object {
	sec := urlSecret("")
	sec.Data = map[string][]byte{"other": []byte("https://collector.example.com/x")}
	return sec
}

func runPolicyCase(t *testing.T, tc policyCase) {
	t.Helper()
	base := fakeapi.New(t, tc.objs...)
	c := fakeapi.Failing(base, tc.fail...)
	rec := &fakeapi.Recorder{}
	pol := &policies{outcome: tc.outcome}
	r := newPolicyReconciler(c, c, pol, rec, PolicyOptions{})
	res, err := r.reconcileNamespaced(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "chat"}})
	if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
		t.Fatalf("error = %v, want %q", err, tc.wantErr)
	}
	if res != tc.wantResult {
		t.Errorf("result = %+v, want %+v", res, tc.wantResult)
	}
	if !slices.Equal(pol.set, tc.wantSet) {
		t.Errorf("policies set %v, want %v", pol.set, tc.wantSet)
	}
	if got := rec.Reasons(); !slices.Equal(got, tc.wantEvents) {
		t.Errorf("events %v, want %v", got, tc.wantEvents)
	}
	if len(tc.objs) == 0 || tc.wantErr != "" {
		return
	}
	np := &berthv1.NotificationPolicy{}
	if err := base.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: "chat"}, np); err != nil {
		t.Fatal(err)
	}
	if written := np.ResourceVersion != "999"; written != tc.wantWritten {
		t.Errorf("written = %v, want %v", written, tc.wantWritten)
	}
	for typ, want := range map[string]string{berthv1.ConditionReady: tc.wantReady, berthv1.ConditionDelivered: tc.wantDeliver} {
		cnd := meta.FindStatusCondition(np.Status.Conditions, typ)
		switch {
		case want == "" && cnd != nil:
			t.Errorf("%s = %+v, want none", typ, cnd)
		case want != "" && (cnd == nil || cnd.Reason != want || cnd.ObservedGeneration != np.Generation):
			t.Errorf("%s = %+v, want reason %s at generation %d", typ, cnd, want, np.Generation)
		}
	}
}

func TestReconcileClusterPolicy(t *testing.T) {
	cluster := func(sel *metav1.LabelSelector) *berthv1.ClusterNotificationPolicy {
		return &berthv1.ClusterNotificationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ops", Generation: 2},
			Spec: berthv1.ClusterNotificationPolicySpec{
				NotificationSettings: berthv1.NotificationSettings{Sink: berthv1.NotificationSink{Type: berthv1.SinkEvent}},
				NamespaceSelector:    sel}}
	}
	cases := []struct {
		name      string
		objs      []client.Object
		fail      []fakeapi.Failure
		wantErr   string
		wantSet   []string
		wantMatch map[string]bool // namespace labels "team" value → selected
	}{
		{name: "a cluster policy that is gone is no longer used", wantSet: []string{"-ops"}},
		{name: "a read that fails names the policy", objs: []client.Object{cluster(nil)},
			fail: []fakeapi.Failure{{Verb: fakeapi.Get}}, wantErr: "reading ClusterNotificationPolicy ops", wantSet: []string{"-ops"}},
		{name: "no selector selects every namespace", objs: []client.Object{cluster(nil)}, wantSet: []string{"ops"},
			wantMatch: map[string]bool{"gpu": true, "cpu": true}},
		{name: "a selector selects the namespaces it matches",
			objs:    []client.Object{cluster(&metav1.LabelSelector{MatchLabels: map[string]string{"team": "gpu"}})},
			wantSet: []string{"ops"}, wantMatch: map[string]bool{"gpu": true, "cpu": false}},
		{name: "an invalid selector is an error that names the policy",
			objs:    []client.Object{cluster(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}})},
			wantErr: "namespaceSelector of ops"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeapi.Failing(fakeapi.New(t, tc.objs...), tc.fail...)
			pol := &policies{}
			r := newPolicyReconciler(c, c, pol, &fakeapi.Recorder{}, PolicyOptions{Namespace: "berth-system"})
			_, err := r.reconcileCluster(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "ops"}})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if !slices.Equal(pol.set, tc.wantSet) {
				t.Errorf("policies set %v, want %v", pol.set, tc.wantSet)
			}
			for team, want := range tc.wantMatch {
				if got := pol.last.Namespaces.Matches(labels.Set{"team": team}); got != want {
					t.Errorf("namespace of team %s selected = %v, want %v", team, got, want)
				}
			}
		})
	}
}
