package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// A Sink delivers reports somewhere. Send must not log or return the
// sink's secrets (a webhook URL is a credential).
type Sink interface {
	// Type is the sink's kind for metrics: "slack", "webhook" or "event".
	Type() string
	// Send delivers one report.
	Send(ctx context.Context, r *Report) error
}

// SendError is a failed delivery, without the sink's address.
type SendError struct {
	// Status is the HTTP status answered (0 when none was).
	Status int
	// RetryAfter is how long the sink asked to wait (0 when it did not).
	RetryAfter time.Duration
	// Retryable says whether trying again may succeed: network errors,
	// 429 and 5xx.
	Retryable bool
	cause     error
}

func (e *SendError) Error() string {
	switch {
	case e.Redirected():
		// Never the Location: it may carry the credential onwards.
		return fmt.Sprintf("the sink redirected (%d %s), and berth does not follow redirects: put the final URL in the Secret",
			e.Status, http.StatusText(e.Status))
	case e.Status != 0:
		return fmt.Sprintf("the sink answered %d %s", e.Status, http.StatusText(e.Status))
	}
	var ee *EgressError
	if errors.As(e.cause, &ee) {
		// Only the rule: the dial error around it names the address.
		return "the sink was not contacted: " + ee.Error()
	}
	return fmt.Sprintf("the sink could not be reached: %v", e.cause)
}

func (e *SendError) Unwrap() error { return e.cause }

// Redirected reports whether the sink answered with a redirect.
func (e *SendError) Redirected() bool { return e.Status >= 300 && e.Status < 400 }

// scrub turns an HTTP client error into a SendError without the URL: a
// *url.Error carries the whole address, secret path included. A connection
// the egress rules refused is not retried: the address will not change
// into an allowed one by waiting.
func scrub(err error) error {
	var ee *EgressError
	if errors.As(err, &ee) {
		return &SendError{cause: ee}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &SendError{Retryable: true, cause: err}
}

// statusError classifies an HTTP status. A redirect is a failure: the
// client does not follow it (refuseRedirect), and trying again gets the
// same answer.
func statusError(code int, retryAfter string) error {
	if code >= 200 && code < 300 {
		return nil
	}
	e := &SendError{Status: code, Retryable: code == http.StatusTooManyRequests || code >= 500}
	if s, err := strconv.Atoi(retryAfter); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// SlackSink posts to a Slack incoming webhook.
type SlackSink struct {
	url    string
	client *http.Client
}

// NewSlackSink returns a sink for the incoming-webhook URL, posting with
// client (nil: a client of NewEgress's default rules with a 10 s timeout).
// Which hosts the URL may name is checked where the URL is read
// (PolicyReconciler), which can say so in the policy's status.
func NewSlackSink(webhookURL string, client *http.Client) *SlackSink {
	return &SlackSink{url: webhookURL, client: orDefault(client)}
}

// Type implements Sink.
func (*SlackSink) Type() string { return "slack" }

// Send implements Sink.
func (s *SlackSink) Send(ctx context.Context, r *Report) error {
	err := slack.PostWebhookCustomHTTPContext(ctx, s.url, s.client, SlackMessage(r))
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rl):
		return &SendError{Status: http.StatusTooManyRequests, RetryAfter: rl.RetryAfter, Retryable: true}
	case errors.As(err, &sc):
		return statusError(sc.Code, "")
	}
	return scrub(err)
}

// WebhookSink posts reports as JSON (Payload) to a URL.
type WebhookSink struct {
	url    string
	client *http.Client
}

// NewWebhookSink returns a sink posting to the URL with client (nil: a
// client of NewEgress's default rules with a 10 s timeout).
func NewWebhookSink(target string, client *http.Client) *WebhookSink {
	return &WebhookSink{url: target, client: orDefault(client)}
}

// Type implements Sink.
func (*WebhookSink) Type() string { return "webhook" }

// Send implements Sink.
func (s *WebhookSink) Send(ctx context.Context, r *Report) error {
	body, err := json.Marshal(NewPayload(r))
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return errors.New("the webhook URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return scrub(err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
	}()
	return statusError(resp.StatusCode, resp.Header.Get("Retry-After"))
}

// orDefault is c, or a client that keeps the default egress rules: a
// sink never posts with a client that follows redirects or dials anywhere.
func orDefault(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return NewEgress(EgressOptions{}).Client(10 * time.Second)
}

// EventReason is the reason of the Warning events the Event sink records.
const EventReason = "GangFailure"

// EventSink records each report as a Warning event on the job (or the
// Workload, for a gang without a job), where `kubectl describe` shows it.
type EventSink struct {
	recorder events.EventRecorder
}

// NewEventSink returns a sink recording with recorder.
func NewEventSink(recorder events.EventRecorder) *EventSink { return &EventSink{recorder: recorder} }

// Type implements Sink.
func (*EventSink) Type() string { return "event" }

// Send implements Sink.
func (s *EventSink) Send(_ context.Context, r *Report) error {
	g := r.Gang
	ref := &corev1.ObjectReference{APIVersion: g.JobAPIVersion, Kind: g.JobKind, Namespace: g.Namespace, Name: g.JobName, UID: types.UID(g.JobUID)}
	if g.JobUID == "" {
		ref = &corev1.ObjectReference{APIVersion: berthv1.GroupVersion.String(), Kind: "Workload", Namespace: g.Namespace, Name: g.JobName, UID: g.UID}
	}
	note := r.Headline()
	if lines := r.podLines(slackMaxPods, plainText); lines != "" {
		note += "; " + strings.ReplaceAll(strings.ReplaceAll(lines, "\n", "; "), "`", "")
	}
	// An event's note is at most 1 kB.
	s.recorder.Eventf(ref, nil, corev1.EventTypeWarning, EventReason, "Notify", "%s", clip(note, 1024))
	return nil
}
