package notify

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/metrics"
)

var created = metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))

// policyEnv is a PolicyReconciler over a fake client holding objs.
type policyEnv struct {
	r        *PolicyReconciler
	n        *Notifier
	c        client.Client
	recorder *events.FakeRecorder
}

func newPolicyEnv(t *testing.T, o PolicyOptions, objs ...client.Object) *policyEnv {
	c := fakeapi.New(t, objs...)
	n := NewNotifier(c, c, nil, metrics.New(), logr.Discard(), NotifierOptions{Dispatch: fastOptions()})
	rec := events.NewFakeRecorder(20)
	return &policyEnv{r: NewPolicyReconciler(c, c, n, rec, o), n: n, c: c, recorder: rec}
}

// urlSecret is team-a's Secret "hook" holding a webhook URL.
func urlSecret(url string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hook"}, Data: map[string][]byte{"url": []byte(url)}}
}

func policy(name string, at metav1.Time, sink berthv1.NotificationSinkType) *berthv1.NotificationPolicy {
	return &berthv1.NotificationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, CreationTimestamp: at},
		Spec: berthv1.NotificationPolicySpec{NotificationSettings: berthv1.NotificationSettings{
			Sink: berthv1.NotificationSink{Type: sink, URLSecretRef: &berthv1.SecretKeyRef{Name: "hook", Key: "url"}}}}}
}

// reconcile reconciles team-a's policy name and returns its condition.
func (e *policyEnv) reconcile(t *testing.T, name, condType string) *metav1.Condition {
	t.Helper()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}}
	if _, err := e.r.reconcileNamespaced(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	np := &berthv1.NotificationPolicy{}
	if err := e.c.Get(context.Background(), req.NamespacedName, np); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(np.Status.Conditions, condType)
}

// TestPolicySinkURL: what berth checks of a sink's URL before it sends
// anything, and how the policy says so.
func TestPolicySinkURL(t *testing.T) {
	internal := PolicyOptions{Egress: NewEgress(EgressOptions{AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})}
	mattermost := PolicyOptions{Egress: NewEgress(EgressOptions{SlackHosts: []string{"chat.example.com"}})}
	cases := []struct {
		name       string
		opts       PolicyOptions
		sink       berthv1.NotificationSinkType
		url        string
		wantReason string
		wantMsg    []string
	}{
		{"Slack on Slack's host", PolicyOptions{}, berthv1.SinkSlack, "https://hooks.slack.com/services/T0/B0/SECRET", berthv1.ReasonSinkReady, nil},
		{"Slack gov", PolicyOptions{}, berthv1.SinkSlack, "https://hooks.slack-gov.com/services/T0/B0/SECRET", berthv1.ReasonSinkReady, nil},
		{"Slack elsewhere", PolicyOptions{}, berthv1.SinkSlack, "https://collector.example.com/SECRET", berthv1.ReasonInvalidURL,
			[]string{"not a Slack incoming-webhook URL", "https://hooks.slack.com", "type Webhook", "--notification-slack-hosts"}},
		{"Slack at the metadata service", PolicyOptions{}, berthv1.SinkSlack, "https://169.254.169.254/SECRET", berthv1.ReasonInvalidURL, nil},
		{"Slack on a host the admin allows", mattermost, berthv1.SinkSlack, "https://chat.example.com/hooks/SECRET", berthv1.ReasonSinkReady, nil},
		{"Slack's host once the admin replaced the list", mattermost, berthv1.SinkSlack, "https://hooks.slack.com/services/SECRET",
			berthv1.ReasonInvalidURL, []string{"https://chat.example.com"}},
		{"webhook anywhere public", PolicyOptions{}, berthv1.SinkWebhook, "https://collector.example.com/SECRET", berthv1.ReasonSinkReady, nil},
		{"webhook at the metadata service", PolicyOptions{}, berthv1.SinkWebhook, "https://169.254.169.254/latest/SECRET",
			berthv1.ReasonEgressRefused, []string{"link-local", "--notification-allowed-cidrs"}},
		{"webhook on loopback", PolicyOptions{}, berthv1.SinkWebhook, "https://[::1]:8443/SECRET", berthv1.ReasonEgressRefused, []string{"loopback"}},
		{"webhook inside, allowed by the admin", internal, berthv1.SinkWebhook, "https://10.1.2.3/SECRET", berthv1.ReasonSinkReady, nil},
		{"webhook over http", PolicyOptions{}, berthv1.SinkWebhook, "http://collector.example.com/SECRET", berthv1.ReasonInvalidURL, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newPolicyEnv(t, tc.opts, policy("chat", created, tc.sink), urlSecret(tc.url))
			c := e.reconcile(t, "chat", berthv1.ConditionReady)
			if c == nil || c.Reason != tc.wantReason || (c.Status == metav1.ConditionTrue) != (tc.wantReason == berthv1.ReasonSinkReady) {
				t.Fatalf("Ready = %+v, want reason %s", c, tc.wantReason)
			}
			for _, want := range tc.wantMsg {
				if !strings.Contains(c.Message, want) {
					t.Errorf("message %q lacks %q", c.Message, want)
				}
			}
			if strings.Contains(c.Message, "SECRET") || strings.Contains(c.Message, "collector") {
				t.Errorf("message %q quotes the URL", c.Message)
			}
			_, used := e.n.policies["team-a/chat"]
			if used != (tc.wantReason == berthv1.ReasonSinkReady) {
				t.Errorf("the notifier uses the policy: %v", used)
			}
			if c.Status == metav1.ConditionFalse {
				if ev := <-e.recorder.Events; !strings.Contains(ev, "Warning "+tc.wantReason) {
					t.Errorf("event %q, want a Warning %s", ev, tc.wantReason)
				}
			}
		})
	}
}

// TestPolicyCap: a namespace's policies beyond the cap, by creation time
// then name, are not used and say why.
func TestPolicyCap(t *testing.T) {
	later := metav1.NewTime(created.Add(time.Second))
	objs := []client.Object{urlSecret("https://collector.example.com/x"),
		policy("b", created, berthv1.SinkWebhook), policy("a", created, berthv1.SinkWebhook), policy("c", later, berthv1.SinkWebhook)}
	e := newPolicyEnv(t, PolicyOptions{PerNamespace: 2}, objs...)
	for _, tc := range []struct {
		name, reason string
	}{{"a", berthv1.ReasonSinkReady}, {"b", berthv1.ReasonSinkReady}, {"c", berthv1.ReasonTooManyPolicies}} {
		c := e.reconcile(t, tc.name, berthv1.ConditionReady)
		if c == nil || c.Reason != tc.reason {
			t.Fatalf("%s: Ready = %+v, want %s", tc.name, c, tc.reason)
		}
		if tc.reason == berthv1.ReasonTooManyPolicies && !strings.Contains(c.Message, "--notification-policies-per-namespace") {
			t.Errorf("%s: message %q does not say what to do", tc.name, c.Message)
		}
	}
	if _, used := e.n.policies["team-a/c"]; used {
		t.Error("the notifier uses the policy beyond the cap")
	}
	// The oldest goes: the one beyond the cap is used once reconciled.
	if err := e.c.Delete(context.Background(), policy("a", created, berthv1.SinkWebhook)); err != nil {
		t.Fatal(err)
	}
	if c := e.reconcile(t, "c", berthv1.ConditionReady); c.Reason != berthv1.ReasonSinkReady {
		t.Errorf("after a's deletion c is %+v, want used", c)
	}
}

func TestPoliciesBeyondCap(t *testing.T) {
	later := metav1.NewTime(created.Add(time.Second))
	items := []berthv1.NotificationPolicy{*policy("z", created, ""), *policy("y", later, ""), *policy("a", later, ""), *policy("m", created, "")}
	cases := []struct {
		limit int
		want  string
	}{{4, ""}, {3, "y"}, {2, "a,y"}, {1, "z,a,y"}}
	for _, tc := range cases {
		if got := strings.Join(PoliciesBeyondCap(items, tc.limit), ","); got != tc.want {
			t.Errorf("PoliciesBeyondCap(limit %d) = %q, want %q", tc.limit, got, tc.want)
		}
	}
}

// TestPolicyDelivered: how the last delivery ended is written to the
// policy's Delivered condition, refusals with the rule that refused, and
// a Warning event when it turns bad.
func TestPolicyDelivered(t *testing.T) {
	e := newPolicyEnv(t, PolicyOptions{}, policy("chat", created, berthv1.SinkWebhook), urlSecret("https://collector.example.com/x"))
	if c := e.reconcile(t, "chat", berthv1.ConditionDelivered); c != nil {
		t.Fatalf("Delivered = %+v before any delivery, want none", c)
	}
	refused := &SendError{cause: &EgressError{Rule: "a private address (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7)"}}
	cases := []struct {
		err        error
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{refused, metav1.ConditionFalse, berthv1.ReasonEgressRefused, "a private address"},
		{&SendError{Status: 307}, metav1.ConditionFalse, berthv1.ReasonSinkRedirected, "does not follow redirects"},
		{&SendError{Status: 404}, metav1.ConditionFalse, berthv1.ReasonDeliveryFailed, "404 Not Found"},
		{nil, metav1.ConditionTrue, berthv1.ReasonDelivered, "accepted"},
	}
	for _, tc := range cases {
		e.n.outcomes.record("team-a/chat", tc.err)
		c := e.reconcile(t, "chat", berthv1.ConditionDelivered)
		if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantMsg) {
			t.Errorf("after %v: Delivered = %+v, want %s %s %q", tc.err, c, tc.wantStatus, tc.wantReason, tc.wantMsg)
		}
		if tc.wantStatus == metav1.ConditionFalse {
			if ev := <-e.recorder.Events; !strings.Contains(ev, "Warning "+tc.wantReason) {
				t.Errorf("event %q, want a Warning %s", ev, tc.wantReason)
			}
		}
	}
	// The change is handed to the controller.
	if n := len(e.n.outcomes.namespaced); n != len(cases) {
		t.Errorf("%d policies handed to the controller, want one per change (%d)", n, len(cases))
	}
}
