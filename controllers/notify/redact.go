package notify

import "regexp"

// Redactor blanks what looks like a secret in text a report carries out of
// the cluster: log tails, termination messages (a container may fall back
// to its log for them) and event notes. It errs towards redacting: a
// report with a blanked word is still useful, a leaked token is not.
// Matching is by pattern, so it catches the common shapes only; policies
// that must never carry logs set logLines: 0. A Redactor is immutable and
// safe for concurrent use.
type Redactor struct {
	patterns []redaction
}

// redaction replaces the matches of re with repl (regexp.Expand syntax).
type redaction struct {
	name string
	re   *regexp.Regexp
	repl string
}

// Redacted stands where a secret was.
const Redacted = "[REDACTED]"

// NewRedactor returns a Redactor for the common secret shapes.
func NewRedactor() *Redactor {
	return &Redactor{patterns: []redaction{
		// A PEM private key, whole, or what is left of it at either end of
		// a clipped tail.
		{"private key", regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\z)`), Redacted},
		{"end of a private key", regexp.MustCompile(`\A(?s:.*?)-----END[A-Z0-9 ]*PRIVATE KEY-----`), Redacted},
		// JWTs (a base64url JSON header and payload) before bearer tokens,
		// so a bearer JWT is blanked whole.
		{"JWT", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), Redacted},
		{"bearer token", regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}`), "${1} " + Redacted},
		{"basic credentials", regexp.MustCompile(`(?i)\b(authorization:\s*basic)\s+[A-Za-z0-9+/=]{4,}`), "${1} " + Redacted},
		// key=value and key: value, where the key ends in a secret's name:
		// password=, DB_PASSWORD=, access_token=, client_secret: ... but not
		// tokens=2048, which training logs are full of.
		{"key-value secret", regexp.MustCompile(
			`(?i)\b([A-Za-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key))` +
				`("?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s"'&,;]+)`), "${1}${2}" + Redacted},
		{"AWS access key ID", regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), Redacted},
		{"Slack token", regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9-]{10,}`), Redacted},
		{"Slack webhook", regexp.MustCompile(`(?i)(https://hooks\.slack(?:-gov)?\.com/)\S+`), "${1}" + Redacted},
	}}
}

// Redact returns s with every match blanked.
func (x *Redactor) Redact(s string) string {
	if s == "" {
		return s
	}
	for _, p := range x.patterns {
		s = p.re.ReplaceAllString(s, p.repl)
	}
	return s
}

// RedactReport redacts the free text of a report: its log tail, the
// failures' messages and the events.
func (x *Redactor) RedactReport(r *Report) {
	r.LogTail = x.Redact(r.LogTail)
	for i := range r.Failures {
		r.Failures[i].Message = x.Redact(r.Failures[i].Message)
	}
	for i := range r.Events {
		r.Events[i] = x.Redact(r.Events[i])
	}
}
