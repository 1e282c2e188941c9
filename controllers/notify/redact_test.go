package notify

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	const (
		jwt     = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLXNpZw"
		pemBody = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
	)
	cases := []struct {
		pattern string // the redaction it exercises
		in      string
		secret  string // must be gone
		keep    string // must stay
	}{
		{"bearer token", "GET /v1 Authorization: Bearer abcdef0123456789.xyz ok", "abcdef0123456789", "Authorization: Bearer " + Redacted + " ok"},
		{"basic credentials", "Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy", "Authorization: Basic " + Redacted},
		{"key-value secret", "connecting with password=hunter2 to db", "hunter2", "password=" + Redacted + " to db"},
		{"key-value secret", "DB_PASSWORD='s3cr3t pass' next", "s3cr3t", "DB_PASSWORD=" + Redacted + " next"},
		{"key-value secret", "url?access_token=tok123&user=bob", "tok123", "access_token=" + Redacted + "&user=bob"},
		{"key-value secret", "client_secret: abc.def", "abc.def", "client_secret: " + Redacted},
		{"key-value secret", `{"token": "t0k3n-value", "n": 1}`, "t0k3n-value", `"token": ` + Redacted},
		{"key-value secret", "secret=xyz", "xyz", "secret=" + Redacted},
		{"AWS access key ID", "using AKIAIOSFODNN7EXAMPLE for s3", "AKIAIOSFODNN7EXAMPLE", "using " + Redacted + " for s3"},
		{"private key", "key:\n-----BEGIN RSA PRIVATE KEY-----\n" + pemBody + "\n-----END RSA PRIVATE KEY-----\nafter",
			pemBody, "key:\n" + Redacted + "\nafter"},
		{"private key", "loaded\n-----BEGIN PRIVATE KEY-----\n" + pemBody, pemBody, "loaded\n" + Redacted},
		{"end of a private key", pemBody + "\n-----END EC PRIVATE KEY-----\nstep 3", pemBody, Redacted + "\nstep 3"},
		{"JWT", "token in header: " + jwt + " end", "c2lnbmF0dXJl", "header: " + Redacted + " end"},
		{"Slack token", "posting as xoxb-1234567890-abcdefghij", "xoxb-1234567890", "posting as " + Redacted},
		{"Slack webhook", "hook https://hooks.slack.com/services/T0/B0/XXXX done", "T0/B0/XXXX", "https://hooks.slack.com/" + Redacted + " done"},
	}
	x := NewRedactor()
	tested := map[string]bool{}
	for _, tc := range cases {
		tested[tc.pattern] = true
		t.Run(tc.pattern+": "+tc.in[:min(len(tc.in), 24)], func(t *testing.T) {
			got := x.Redact(tc.in)
			if strings.Contains(got, tc.secret) || !strings.Contains(got, tc.keep) {
				t.Errorf("Redact(%q) = %q, want %q gone and %q kept", tc.in, got, tc.secret, tc.keep)
			}
		})
	}
	for _, p := range x.patterns {
		if !tested[p.name] {
			t.Errorf("redaction %q has no case", p.name)
		}
	}
}

// TestRedactLeavesTrainingLogs: what training jobs print all the time is
// not mistaken for a secret.
func TestRedactLeavesTrainingLogs(t *testing.T) {
	for _, line := range []string{
		"step 1200 loss 1.93 tokens=2048 lr=3e-4",
		"tokenizer: loaded 32000 tokens",
		"CUDA out of memory. Tried to allocate 2.00 GiB",
		"the bearer of bad news",
		"max_tokens: 4096",
	} {
		if got := NewRedactor().Redact(line); got != line {
			t.Errorf("Redact(%q) = %q, want it unchanged", line, got)
		}
	}
}

// TestRedactReport: every free text of a report is redacted: the log
// tail, the failures' messages and the events.
func TestRedactReport(t *testing.T) {
	r := sampleReport()
	r.LogTail = "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI"
	r.Failures[0].Message = "panic: password=hunter2"
	r.Events = []string{"Failed: pulling with token=abc123"}
	NewRedactor().RedactReport(r)
	for _, c := range []struct{ got, secret string }{
		{r.LogTail, "wJalrXUtnFEMI"}, {r.Failures[0].Message, "hunter2"}, {r.Events[0], "abc123"},
	} {
		if strings.Contains(c.got, c.secret) || !strings.Contains(c.got, Redacted) {
			t.Errorf("%q still carries %q", c.got, c.secret)
		}
	}
}
