package notify

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// sink builds the policy's sink, or says why it cannot: the reason and
// message of its Ready condition.
func (r *PolicyReconciler) sink(ctx context.Context, s berthv1.NotificationSink, ns string) (Sink, string, string) {
	if s.Type == berthv1.SinkEvent {
		return NewEventSink(r.recorder), berthv1.ReasonSinkReady, "reports are recorded as Warning events on the jobs"
	}
	ref := s.URLSecretRef
	if ref == nil {
		return nil, berthv1.ReasonSecretNotReadable, "a Slack or Webhook sink needs urlSecretRef"
	}
	key := ref.Key
	if key == "" {
		key = "url"
	}
	secret := &corev1.Secret{}
	err := r.secrets.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, berthv1.ReasonSecretNotReadable, fmt.Sprintf("Secret %s/%s does not exist: create it with the URL under key %q", ns, ref.Name, key)
	case apierrors.IsForbidden(err):
		return nil, berthv1.ReasonSecretNotReadable, fmt.Sprintf(
			"berth may not read Secret %s/%s: grant it with `kubectl -n %s create role berth-notify --verb=get --resource=secrets --resource-name=%s` "+
				"and `kubectl -n %s create rolebinding berth-notify --role=berth-notify --serviceaccount=<berth's namespace>:<berth's service account>`",
			ns, ref.Name, ns, ref.Name, ns)
	case err != nil:
		return nil, berthv1.ReasonSecretNotReadable, fmt.Sprintf("reading Secret %s/%s: %v", ns, ref.Name, err)
	}
	raw, ok := secret.Data[key]
	if !ok {
		return nil, berthv1.ReasonSecretNotReadable, fmt.Sprintf("Secret %s/%s has no key %q", ns, ref.Name, key)
	}
	where := fmt.Sprintf("key %q of Secret %s/%s", key, ns, ref.Name)
	u, reason, msg := r.checkURL(s.Type, strings.TrimSpace(string(raw)), where)
	if u == nil {
		return nil, reason, msg
	}
	if s.Type == berthv1.SinkSlack {
		return NewSlackSink(u.String(), r.opts.HTTPClient), berthv1.ReasonSinkReady, "reports are posted to the Slack webhook"
	}
	return NewWebhookSink(u.String(), r.opts.HTTPClient), berthv1.ReasonSinkReady, "reports are posted to the webhook"
}

// checkURL parses a sink's URL and checks what can be checked before a
// report is sent: an https URL; for Slack, a host berth allows for Slack;
// and an IP address named in it, which the egress rules would refuse on
// every delivery. A name is not resolved here: the dialer checks the
// address it resolves to each time. where says which Secret key the URL
// came from. Messages never quote the URL: it is a credential.
func (r *PolicyReconciler) checkURL(t berthv1.NotificationSinkType, raw, where string) (u *url.URL, reason, msg string) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, berthv1.ReasonInvalidURL, where + " is not an https:// URL"
	}
	if t == berthv1.SinkSlack && !r.opts.Egress.SlackHostAllowed(u.Host) {
		return nil, berthv1.ReasonInvalidURL, fmt.Sprintf(
			"%s is not a Slack incoming-webhook URL: a Slack sink posts only to https://%s; "+
				"for another service use a sink of type Webhook, or ask an admin to allow its host with --notification-slack-hosts",
			where, strings.Join(r.opts.Egress.SlackHosts(), " or https://"))
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := r.opts.Egress.Check(ip); err != nil {
			return nil, berthv1.ReasonEgressRefused, fmt.Sprintf("%s names an IP address, and %v", where, err)
		}
	}
	return u, "", ""
}
