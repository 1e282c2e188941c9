package notify

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"
)

// Slack limits that a message must respect (Block Kit reference): a header
// is plain text of at most 150 characters, a section's text at most 3,000,
// a section at most 10 fields of at most 2,000 each.
const (
	slackHeaderMax  = 150
	slackSectionMax = 3000
	slackFieldMax   = 2000
	slackMaxFields  = 10
	// slackMaxPods is how many failed pods a message lists one by one.
	slackMaxPods = 5
)

// SlackMessage renders a report as a Slack incoming-webhook message in
// Block Kit: a header with the headline, the gang's placement as fields,
// the failed pods, the log tail, the pod's recent events, and what to run
// next. Text is the headline, for notifications and clients without
// blocks.
//
// Much of a report is written by the tenant (termination messages, events,
// logs, even an owner's kind), so every piece of it is escaped
// (slackEscape) and every mrkdwn object is verbatim: Slack then neither
// links nor mentions on its own, and only berth's own markup is markup.
func SlackMessage(r *Report) *slack.WebhookMessage {
	md := func(s string, limit int) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.MarkdownType, clip(s, limit), false, true)
	}
	blocks := []slack.Block{
		// plain_text is not parsed for links or mentions.
		slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, clip(r.Headline(), slackHeaderMax), false, false)),
	}
	var fields []*slack.TextBlockObject
	for _, f := range r.placement() {
		if len(fields) < slackMaxFields {
			fields = append(fields, md(fmt.Sprintf("*%s*\n%s", f[0], slackEscape(f[1])), slackFieldMax))
		}
	}
	blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))
	blocks = append(blocks, slack.NewSectionBlock(md(r.podLines(slackMaxPods, slackEscape), slackSectionMax), nil, nil))
	if r.LogTail != "" {
		// Escaping lengthens the text: it is clipped after, so that the
		// closing fence always fits (a cut entity shows as text, and the
		// ellipsis keeps a backtick from the fence).
		tail := clip(slackCode(r.LogTail), slackSectionMax-40)
		blocks = append(blocks, slack.NewSectionBlock(md("*Previous log*\n```"+tail+"```", slackSectionMax), nil, nil))
	}
	if len(r.Events) > 0 {
		var evs []string
		for _, e := range r.Events {
			evs = append(evs, slackEscape(e))
		}
		blocks = append(blocks, slack.NewSectionBlock(md("*Recent events*\n"+strings.Join(evs, "\n"), slackSectionMax), nil, nil))
	}
	var cmds []slack.MixedElement
	for _, c := range r.Commands() {
		cmds = append(cmds, md("`"+slackCode(c)+"`", slackFieldMax))
	}
	blocks = append(blocks, slack.NewDividerBlock(), slack.NewContextBlock("", cmds...))
	return &slack.WebhookMessage{Text: clip(slackEscape(r.Headline()), slackSectionMax), Parse: "none",
		UnfurlLinks: ptrTo(false), UnfurlMedia: ptrTo(false), Blocks: &slack.Blocks{BlockSet: blocks}}
}

// slackEscape makes text inert in Slack's mrkdwn. Slack parses only &, <
// and > as the markup of links and mentions (<!channel>, <@U123>,
// <http://x|y>), and asks for exactly these three to be escaped; and no
// two backticks are left adjacent, so text can neither open nor close a
// code block around what follows it.
func slackEscape(s string) string {
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	for strings.Contains(s, "``") {
		s = strings.ReplaceAll(s, "``", "`\u200b`")
	}
	return s
}

// slackCode is text escaped to sit between backtick fences: escaped, and
// kept from touching a fence with a backtick of its own, which would make
// the fence longer and move where the block ends.
func slackCode(s string) string {
	s = slackEscape(s)
	if strings.HasPrefix(s, "`") {
		s = "\u200b" + s
	}
	if strings.HasSuffix(s, "`") {
		s += "\u200b"
	}
	return s
}

// plainText leaves text as it is, for sinks that render no markup.
func plainText(s string) string { return s }

func ptrTo[T any](v T) *T { return &v }

// placement is the gang's context as label/value pairs, in the order a
// reader needs them.
func (r *Report) placement() [][2]string {
	g := r.Gang
	out := [][2]string{
		{"Job", fmt.Sprintf("%s %s/%s", g.JobKind, g.Namespace, g.JobName)},
		{"Queue", fmt.Sprintf("%s → %s", g.LocalQueue, g.ClusterQueue)},
		{"Flavor", g.Flavor},
		{"Affected", fmt.Sprintf("%d of %d pods", r.Affected(), g.Pods)},
	}
	if idle := r.IdleGPUs(); idle > 0 {
		waiting := g.Pods - r.Affected()
		who := fmt.Sprintf("the %d pods that wait", waiting)
		if waiting == 1 {
			who = "the 1 pod that waits"
		}
		out = append(out, [2]string{"Idle GPUs", fmt.Sprintf("%d, on %s for the rest of the gang", idle, who)})
	}
	if g.Domain != "" {
		out = append(out, [2]string{"Domain", g.Domain})
	}
	if g.Booking != "" {
		out = append(out, [2]string{"Booking", g.Booking})
	}
	return out
}

// podLines lists up to max failures one per line, with what ended each
// container, and says how many more there were; esc makes the reasons and
// messages, which tenants can write, safe for the sink's markup.
func (r *Report) podLines(limit int, esc func(string) string) string {
	var b strings.Builder
	for i, f := range r.Failures {
		if i == limit {
			fmt.Fprintf(&b, "… and %d more\n", len(r.Failures)-limit)
			break
		}
		b.WriteString("• ")
		b.WriteString(f.describe(esc))
		b.WriteString("\n")
	}
	if r.Suppressed > 0 {
		fmt.Fprintf(&b, "(%d repeats folded in)\n", r.Suppressed)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Describe is one failure in one line: where, and what ended it.
func (f Failure) Describe() string { return f.describe(plainText) }

// describe is Describe with the free text passed through esc. Pod,
// container and node names are DNS names, which the API server validated:
// they need no escaping between backticks.
func (f Failure) describe(esc func(string) string) string {
	var parts []string
	if f.Pod != "" {
		where := "`" + f.Pod + "`"
		if f.Container != "" {
			where += " container `" + f.Container + "`"
		}
		if f.Node != "" {
			where += " on `" + f.Node + "`"
		}
		parts = append(parts, where)
	}
	if f.Reason != "" {
		parts = append(parts, esc(f.Reason))
	}
	if f.ExitCode != 0 {
		parts = append(parts, fmt.Sprintf("exit code %d", f.ExitCode))
	}
	if f.Signal != 0 {
		parts = append(parts, fmt.Sprintf("signal %d", f.Signal))
	}
	if f.Restarts > 0 {
		parts = append(parts, fmt.Sprintf("restarts: %d", f.Restarts))
	}
	if f.Message != "" {
		parts = append(parts, esc(f.Message))
	}
	return strings.Join(parts, ", ")
}

// clip shortens s to at most limit bytes, on a rune boundary, marking the
// cut with an ellipsis.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = "…"
	cut := limit - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
