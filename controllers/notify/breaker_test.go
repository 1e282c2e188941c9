package notify

import (
	"testing"
	"time"
)

func TestBreakers(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := t0.Add
	// Each step: a result of an attempt (ok or not) at a time, or an ask
	// whether an attempt is allowed; want is what the step returns.
	type event struct {
		kind string // "fail", "ok", "allow", "forget"
		at   time.Duration
		// fail, ok: "opened", "closed" or ""; allow: "yes" or "no";
		// forget: the sink type when the breaker was open, or "".
		want string
	}
	cases := []struct {
		name   string
		events []event
	}{
		{"opens after threshold failures in a row, then drops", []event{
			{"fail", 0, ""}, {"allow", 0, "yes"}, {"fail", 0, ""}, {"fail", 0, "opened"},
			{"allow", time.Minute, "no"}, {"allow", 9 * time.Minute, "no"},
		}},
		{"a success resets the count", []event{
			{"fail", 0, ""}, {"fail", 0, ""}, {"ok", 0, ""}, {"fail", 0, ""}, {"fail", 0, ""}, {"allow", 0, "yes"},
		}},
		{"after the cool-down one trial; its success closes", []event{
			{"fail", 0, ""}, {"fail", 0, ""}, {"fail", 0, "opened"},
			{"allow", 10 * time.Minute, "yes"}, {"allow", 10 * time.Minute, "no"}, // one trial at a time
			{"ok", 10 * time.Minute, "closed"}, {"allow", 10 * time.Minute, "yes"},
		}},
		{"forgetting a sink closes its breaker", []event{
			{"fail", 0, ""}, {"fail", 0, ""}, {"fail", 0, "opened"}, {"forget", 0, "slack"}, {"allow", 0, "yes"}, {"forget", 0, ""},
		}},
		{"a failed trial opens it for another cool-down", []event{
			{"fail", 0, ""}, {"fail", 0, ""}, {"fail", 0, "opened"},
			{"allow", 10 * time.Minute, "yes"}, {"fail", 10 * time.Minute, ""},
			{"allow", 19 * time.Minute, "no"}, {"allow", 20 * time.Minute, "yes"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBreakers(3, 10*time.Minute)
			for i, e := range tc.events {
				var got string
				switch e.kind {
				case "forget":
					got, _ = b.forget("team-a/chat")
				case "allow":
					got = map[bool]string{true: "yes", false: "no"}[b.allow("team-a/chat", at(e.at))]
				default:
					opened, closed := b.record("team-a/chat", "slack", e.kind == "ok", at(e.at))
					got = map[[2]bool]string{{true, false}: "opened", {false, true}: "closed"}[[2]bool{opened, closed}]
				}
				if got != e.want {
					t.Fatalf("event %d (%s at %s) = %q, want %q", i, e.kind, e.at, got, e.want)
				}
			}
		})
	}
}
