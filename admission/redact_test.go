package admission

import (
	"strings"
	"testing"
)

// tenant is the namespace that reads its workload's messages; theirs is
// another team's.
const tenant, theirs = "team-a", "team-b"

// in moves w to namespace ns.
func in(ns string, w Workload) Workload {
	w.Key.Namespace = ns
	return w
}

// pendingOf is the pending update of the workload named name in r, which
// must have reason want.
func pendingOf(t *testing.T, r Result, name string, want PendingReason) PendingUpdate {
	t.Helper()
	u, ok := pendingReason(r, name)
	if !ok || u.Reason != want {
		t.Fatalf("%s: %+v, want reason %s in %s", name, u, want, fmtResult(r))
	}
	return u
}

// TestMessagesRedactedForTheirNamespace runs the engine with the tenant's
// workload x and another workload o, of another namespace or of the
// tenant's own, and reads what the engine says about x as x's namespace
// reads it: o is named only when it is of the tenant's namespace, and its
// priority with it.
func TestMessagesRedactedForTheirNamespace(t *testing.T) {
	inCQ := preempt(PreemptionPolicy{WithinClusterQueue: PreemptLowerPriority})
	for _, sc := range []struct {
		name string
		// read returns the engine's text about x, as written and as x's
		// namespace reads it, with o of namespace other.
		read func(t *testing.T, other string) (raw, read string)
	}{
		{"blocked behind the head of a StrictFIFO queue", func(t *testing.T, other string) (string, string) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, strict))
			mustWL(t, e, running(job("r", "a", 0, 0, 1, 8), "a", 1), in(other, job("o", "a", 0, 1, 1, 4)), in(tenant, job("x", "a", 0, 2, 1, 4)))
			u := pendingOf(t, cycle(t, e), "x", BlockedByHead)
			return u.Message, u.RedactedMessage()
		}},
		{"waiting for the victims of its preemption", func(t *testing.T, other string) (string, string) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, inCQ))
			mustWL(t, e, running(in(other, job("o", "a", 0, 0, 1, 8)), "a", 1), in(tenant, job("x", "a", 5, 1, 1, 8)))
			u := pendingOf(t, cycle(t, e), "x", WaitingForPreemption)
			return u.Message, u.RedactedMessage()
		}},
		{"kept from what the queue reserves for its head", func(t *testing.T, other string) (string, string) {
			e := newEngine(t, Options{StarvationSkips: 1})
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}))
			mustWL(t, e, job("s0", "a", 0, 0, 1, 6), in(other, job("o", "a", 0, 1, 1, 8)), job("s1", "a", 0, 2, 1, 1))
			cycle(t, e)
			mustWL(t, e, in(tenant, job("x", "a", 0, 3, 1, 1)))
			u := pendingOf(t, cycle(t, e), "x", ReservedForHead)
			return u.Message, u.RedactedMessage()
		}},
		{"preempted", func(t *testing.T, other string) (string, string) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, inCQ))
			mustWL(t, e, running(in(tenant, job("x", "a", 0, 0, 1, 8)), "a", 1), in(other, job("o", "a", 5, 1, 1, 8)))
			res := cycle(t, e)
			if len(res.Preemptions) != 1 || res.Preemptions[0].Victim.Name != "x" {
				t.Fatalf("preemptions %+v, want x's", res.Preemptions)
			}
			p := res.Preemptions[0]
			return p.Message, p.RedactedMessage()
		}},
		{"explained while another preemptor of its queue waits", func(t *testing.T, other string) (string, string) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{8}, inCQ))
			mustWL(t, e, running(job("low", "a", 0, 0, 1, 8), "a", 1), in(other, job("o", "a", 5, 1, 1, 8)), in(tenant, job("x", "a", 5, 2, 1, 8)))
			cycle(t, e)
			ex, ok := e.Explain(WorkloadKey{Namespace: tenant, Name: "x"})
			if !ok || ex.Preemption.Possible {
				t.Fatalf("x: %+v", ex)
			}
			return ex.Preemption.Message, Redact(ex.Preemption.Message, ex.Mentions, tenant)
		}},
	} {
		for _, other := range []string{theirs, tenant} {
			t.Run(sc.name+"/o of "+other, func(t *testing.T) {
				raw, read := sc.read(t, other)
				o := WorkloadKey{Namespace: other, Name: "o"}.String()
				if !strings.Contains(raw, o) {
					t.Fatalf("the message %q does not name %s: the case tests nothing", raw, o)
				}
				if other == tenant {
					if read != raw {
						t.Fatalf("the tenant's own workload is redacted: %q, want %q", read, raw)
					}
					return
				}
				if strings.Contains(read, o) || !strings.Contains(read, Redacted) || strings.Contains(read, priorityNote) {
					t.Fatalf("read as %s: %q, want %s written %q, without its priority", tenant, read, o, Redacted)
				}
			})
		}
	}
}

func TestRedact(t *testing.T) {
	b := WorkloadKey{Namespace: theirs, Name: "train"}
	own := WorkloadKey{Namespace: tenant, Name: "train"}
	for _, tc := range []struct {
		name, text string
		mentions   []WorkloadKey
		want       string
	}{
		{"another namespace's key", "waiting behind team-b/train, the head", []WorkloadKey{b},
			"waiting behind " + Redacted + ", the head"},
		{"every occurrence", "team-b/train: preempted to admit team-b/train in", []WorkloadKey{b},
			Redacted + ": preempted to admit " + Redacted + " in"},
		{"its priority with it", "preempted to admit team-b/train (priority -3) in", []WorkloadKey{b},
			"preempted to admit " + Redacted + " in"},
		{"the viewer's own key and priority stay", "preempted to admit team-a/train (priority 5) in", []WorkloadKey{own},
			"preempted to admit team-a/train (priority 5) in"},
		{"only the keys mentioned", "team-b/train, team-b/other", []WorkloadKey{b}, Redacted + ", team-b/other"},
		{"a key that begins a longer name is not cut", "team-b/train-2 and team-b/train", []WorkloadKey{b},
			"team-b/train-2 and " + Redacted},
		{"a key that ends a longer name is not cut", "xteam-b/train and vendor.team-b/train", []WorkloadKey{b},
			"xteam-b/train and vendor.team-b/train"},
		{"a key that ends a sentence", "waiting for team-b/train.", []WorkloadKey{b}, "waiting for " + Redacted + "."},
		{"keys that begin one another", "team-b/train-2, team-b/train",
			[]WorkloadKey{b, {Namespace: theirs, Name: "train-2"}}, Redacted + ", " + Redacted},
		{"nothing named", "insufficient quota for nvidia.com/gpu", []WorkloadKey{b}, "insufficient quota for nvidia.com/gpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.text, tc.mentions, tenant); got != tc.want {
				t.Fatalf("Redact(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}
