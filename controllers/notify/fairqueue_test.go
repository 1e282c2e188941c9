package notify

import (
	"strings"
	"testing"
)

// step is one operation on a fairQueue: push "ns:id", pop (want the id
// or "" for none), or done "ns".
type step struct{ op, arg, want string }

func TestFairQueue(t *testing.T) {
	cases := []struct {
		name  string
		limit int
		steps []step
	}{
		{"round-robin across namespaces, however many one has", 10, []step{
			{"push", "a:a1", ""}, {"push", "a:a2", ""}, {"push", "a:a3", ""}, {"push", "b:b1", ""}, {"push", "c:c1", ""},
			{"pop", "", "a1"}, {"done", "a", ""},
			{"pop", "", "b1"}, {"done", "b", ""},
			{"pop", "", "c1"}, {"done", "c", ""},
			{"pop", "", "a2"}, {"done", "a", ""},
			{"pop", "", "a3"}, {"done", "a", ""},
			{"pop", "", ""},
		}},
		{"one in flight per namespace", 10, []step{
			{"push", "a:a1", ""}, {"push", "a:a2", ""}, {"push", "b:b1", ""},
			{"pop", "", "a1"},
			{"pop", "", "b1"},
			{"pop", "", ""}, // a is busy, b has nothing more
			{"done", "a", ""},
			{"pop", "", "a2"},
		}},
		{"a busy namespace keeps its turn", 10, []step{
			{"push", "a:a1", ""}, {"pop", "", "a1"},
			{"push", "a:a2", ""}, {"push", "b:b1", ""}, {"push", "c:c1", ""},
			{"pop", "", "b1"}, {"done", "a", ""}, {"done", "b", ""},
			{"pop", "", "a2"},
			{"pop", "", "c1"},
		}},
		{"each namespace bounded on its own", 2, []step{
			{"push", "a:a1", ""}, {"push", "a:a2", ""}, {"push", "a:a3", "full"}, {"push", "b:b1", ""},
			{"pop", "", "a1"}, {"pop", "", "b1"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := newFairQueue(tc.limit)
			for i, s := range tc.steps {
				switch s.op {
				case "push":
					ns, id, _ := strings.Cut(s.arg, ":")
					accepted := q.push(delivery{queue: ns, policy: id})
					if accepted != (s.want != "full") {
						t.Fatalf("step %d: push %s accepted=%v, want %q", i, s.arg, accepted, s.want)
					}
				case "pop":
					d, ok := q.pop()
					if got := d.policy; ok != (s.want != "") || got != s.want {
						t.Fatalf("step %d: pop = %q (%v), want %q", i, got, ok, s.want)
					}
				case "done":
					q.done(s.arg)
				}
			}
		})
	}
}
