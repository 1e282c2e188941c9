package notify

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// sampleReport is three OOM-killed pods of an 8-pod gang on booked nodes.
func sampleReport() *Report {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	g := Gang{UID: "wl-1", JobKind: "Job", JobName: "train-x", Namespace: "team-a", LocalQueue: "team", ClusterQueue: "gpu",
		Flavor: "h200", Domain: "rack=r7", Booking: "train-x-booking-1", Pods: 8, GPUsPerPod: 8}
	r := &Report{Gang: g, Kind: OOMKilled, Suppressed: 2,
		LogTail: "step 1200 loss 1.93\nCUDA out of memory. Tried to allocate 2.00 GiB",
		Events:  []string{"Killing: Stopping container train", "BackOff: Back-off restarting failed container"}}
	for i, node := range []string{"h200-r7-0", "h200-r7-1", "h200-r7-3"} {
		r.Failures = append(r.Failures, Failure{Kind: OOMKilled, Pod: "train-x-" + string(rune('a'+i)), Node: node, Container: "train",
			Reason: "OOMKilled", ExitCode: 137, Restarts: 1, At: at})
	}
	return r
}

func TestSlackMessageGolden(t *testing.T) {
	got, err := json.MarshalIndent(SlackMessage(sampleReport()), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "slack-oomkilled.json")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(want) != string(got)+"\n" {
		t.Errorf("Slack message changed; got:\n%s", got)
	}
}

func TestHeadline(t *testing.T) {
	r := sampleReport()
	cases := []struct {
		name string
		edit func(*Report)
		want string
	}{
		{"pods of a gang", func(*Report) {}, "3 of 8 pods of Job team-a/train-x were OOM-killed: OOMKilled"},
		{"the gang itself", func(r *Report) {
			r.Kind = Evicted
			r.Failures = []Failure{{Kind: Evicted, Reason: "Preempted"}}
		}, "Job team-a/train-x evicted: Preempted"},
		{"no reason given", func(r *Report) {
			r.Kind = Unschedulable
			r.Failures = []Failure{{Kind: Unschedulable, Pod: "p"}}
		}, "1 of 8 pods of Job team-a/train-x are not scheduled: Unschedulable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleReport()
			tc.edit(r)
			if got := r.Headline(); got != tc.want {
				t.Errorf("Headline() = %q, want %q", got, tc.want)
			}
		})
	}
	if got := r.IdleGPUs(); got != 40 {
		t.Errorf("IdleGPUs() = %d, want 40: the 5 pods left of 8 wait with 8 GPUs each", got)
	}
}

func TestSlackMessageRespectsLimits(t *testing.T) {
	r := sampleReport()
	r.Gang.JobName = strings.Repeat("ü", 200)
	r.LogTail = strings.Repeat("x", 10000)
	for i := range 40 {
		r.Failures = append(r.Failures, Failure{Kind: OOMKilled, Pod: strings.Repeat("p", 60) + string(rune('A'+i))})
	}
	raw, err := json.Marshal(SlackMessage(r))
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Blocks []struct {
			Type   string                  `json:"type"`
			Text   *struct{ Text string }  `json:"text"`
			Fields []struct{ Text string } `json:"fields"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	for i, b := range msg.Blocks {
		if b.Text != nil {
			limit := slackSectionMax
			if b.Type == "header" {
				limit = slackHeaderMax
			}
			if n := utf8.RuneCountInString(b.Text.Text); n > limit || !utf8.ValidString(b.Text.Text) {
				t.Errorf("block %d (%s): %d characters (limit %d), valid UTF-8 %v", i, b.Type, n, limit, utf8.ValidString(b.Text.Text))
			}
		}
		if len(b.Fields) > slackMaxFields {
			t.Errorf("block %d: %d fields", i, len(b.Fields))
		}
	}
	if !strings.Contains(string(raw), "and 38 more") {
		t.Errorf("the message does not say how many failures it left out")
	}
}

// mrkdwnTexts are the mrkdwn texts of a message, with whether each is
// verbatim.
func mrkdwnTexts(t *testing.T, r *Report) (top string, texts []string, verbatim []bool) {
	raw, err := json.Marshal(SlackMessage(r))
	if err != nil {
		t.Fatal(err)
	}
	type text struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Verbatim bool   `json:"verbatim"`
	}
	var msg struct {
		Text   string `json:"text"`
		Blocks []struct {
			Text     *text  `json:"text"`
			Fields   []text `json:"fields"`
			Elements []text `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	for _, b := range msg.Blocks {
		all := append(append([]text(nil), b.Fields...), b.Elements...)
		if b.Text != nil {
			all = append(all, *b.Text)
		}
		for _, x := range all {
			if x.Type == "mrkdwn" {
				texts, verbatim = append(texts, x.Text), append(verbatim, x.Verbatim)
			}
		}
	}
	return msg.Text, texts, verbatim
}

// TestSlackMessageEscapes: what tenants write into a report (termination
// messages, events, logs, an owner's kind) is shown, not parsed: no
// mention, link or code block of theirs reaches Slack as markup.
func TestSlackMessageEscapes(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Report)
		want string // how the text shows up, escaped
	}{
		{"a mention in a termination message", func(r *Report) { r.Failures[0].Message = "<!channel> look" }, "&lt;!channel&gt; look"},
		{"a planted link", func(r *Report) { r.Failures[1].Message = "see <http://evil.example|the runbook>" },
			"see &lt;http://evil.example|the runbook&gt;"},
		{"an event with a user mention and an ampersand", func(r *Report) { r.Events = []string{"Hi: <@U123> & co"} }, "&lt;@U123&gt; &amp; co"},
		{"a log that closes the code block", func(r *Report) { r.LogTail = "ok\n```\n<!here> *owned*\n```" }, "&lt;!here&gt;"},
		{"a log that ends in a backtick", func(r *Report) { r.LogTail = "value `x`" }, "value `x`\u200b```"},
		{"a reason with markup", func(r *Report) { r.Failures[0].Reason = "<!everyone>" }, "&lt;!everyone&gt;"},
		{"an owner's kind", func(r *Report) { r.Gang.JobKind = "<!channel>" }, "&lt;!channel&gt;"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleReport()
			tc.edit(r)
			top, texts, verbatim := mrkdwnTexts(t, r)
			all := strings.Join(texts, "\n")
			if !strings.Contains(all, tc.want) {
				t.Errorf("the message lacks %q:\n%s", tc.want, all)
			}
			for i, s := range append(texts, top) {
				// berth writes no link or mention itself: any < is a tenant's.
				if strings.Contains(s, "<") {
					t.Errorf("text %d keeps markup: %q", i, s)
				}
				if n := strings.Count(s, "```"); n != 0 && n != 2 {
					t.Errorf("text %d has %d code fences, want berth's 2: %q", i, n, s)
				}
			}
			for i, v := range verbatim {
				if !v {
					t.Errorf("mrkdwn text %d is not verbatim: Slack would link and mention in it", i)
				}
			}
		})
	}
}
