package admission

import "strings"

// The engine's messages name other workloads: the StrictFIFO head a workload
// waits behind, the head it leaves reserved resources to, the victims it waits
// for, the preemptor that evicted it. Each is written where the workload's
// namespace reads it — its Workload's conditions, events on it and its job,
// its gang's notifications, its LocalQueue's line in the visibility API — and
// anyone who may read a namespace reads them there, while the names of other
// teams' workloads are not theirs to see. Every such writer redacts with the
// rule below, from the keys the engine lists beside the message
// (PendingUpdate.Mentions, Preemption.Preemptor, Explanation.Mentions): the
// rule lives here, beside the messages it reads, so that a message and its
// redaction change together.

// Redacted stands, in text a namespace reads, for a workload of another
// namespace.
const Redacted = "a workload of another namespace"

// priorityNote follows a workload's key where a message gives its priority
// ("team-b/train (priority 5)"), so that Redact can drop it with the key.
const priorityNote = " (priority "

// Shown is how key is named to readers of namespace viewer: by its key when
// it is of that namespace, as Redacted otherwise.
func Shown(key WorkloadKey, viewer string) string {
	if key.Namespace == viewer {
		return key.String()
	}
	return Redacted
}

// Redact returns text as readers of namespace viewer may see it: each
// workload of mentions — the workloads text names — that is not of viewer
// is written Redacted wherever text names it. A priority the text gives
// with it goes too: another team's priority says how much its work
// matters, and with the ClusterQueue and the time it tells which workload
// the redacted key was; a victim learns enough from the rule that chose it
// ("lower priority in the same ClusterQueue") and its own priority.
//
// A key is replaced only where it stands as a whole, so that one key that
// ends another ("ns/train" in "ns/train-2") or sits inside a longer name
// ("com/gpu" in "nvidia.com/gpu") is not cut out of it.
func Redact(text string, mentions []WorkloadKey, viewer string) string {
	for _, k := range mentions {
		if k.Namespace != viewer {
			text = replaceKey(text, k.String())
		}
	}
	return text
}

// replaceKey writes Redacted for every whole occurrence of key in text,
// with the priority note that follows it.
func replaceKey(text, key string) string {
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, key)
		if i < 0 {
			break
		}
		end := i + len(key)
		if (i > 0 && inName(rest[i-1])) || continuesName(rest[end:]) {
			b.WriteString(rest[:end])
			rest = rest[end:]
			continue
		}
		b.WriteString(rest[:i])
		b.WriteString(Redacted)
		rest = rest[end+priorityLen(rest[end:]):]
	}
	if b.Len() == 0 {
		return text
	}
	b.WriteString(rest)
	return b.String()
}

// inName reports whether c may be part of a namespace or a workload name
// (DNS subdomain names), or of a key ('/').
func inName(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '/'
}

// continuesName reports whether s, the text right after a key, continues
// the name: a '.' that ends a sentence does not.
func continuesName(s string) bool {
	if s == "" || !inName(s[0]) {
		return false
	}
	return s[0] != '.' || len(s) > 1 && inName(s[1])
}

// priorityLen is the length of the priority note that begins s
// (" (priority -3)"), 0 when s does not begin with one.
func priorityLen(s string) int {
	if !strings.HasPrefix(s, priorityNote) {
		return 0
	}
	n := len(priorityNote)
	if n < len(s) && s[n] == '-' {
		n++
	}
	digits := n
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == digits || n >= len(s) || s[n] != ')' {
		return 0
	}
	return n + 1
}
