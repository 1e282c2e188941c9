package notify

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func gang(uid string, pods int) Gang {
	return Gang{UID: types.UID(uid), JobKind: "Job", JobName: "train-" + uid, Namespace: "team-a", Pods: pods, GPUsPerPod: 8}
}

func failure(kind Kind, pod string, at time.Time) Failure {
	return Failure{Kind: kind, Pod: pod, Container: "train", Reason: string(kind), At: at}
}

func TestAggregator(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type add struct {
		at   int
		gang string
		kind Kind
		pod  string
	}
	type report struct {
		gang       string
		kind       Kind
		affected   int
		suppressed int
	}
	cases := []struct {
		name string
		adds []add
		// polls maps a poll time to the reports due then.
		polls map[int][]report
	}{{
		name: "siblings failing together make one report after the settle time",
		adds: []add{{0, "a", OOMKilled, "p0"}, {1, "a", OOMKilled, "p1"}, {2, "a", OOMKilled, "p2"}},
		polls: map[int][]report{
			4: nil,
			5: {{gang: "a", kind: OOMKilled, affected: 3}},
			6: nil,
		},
	}, {
		name:  "a pod restarting again inside the window is counted, not repeated",
		adds:  []add{{0, "a", Restarted, "p0"}, {1, "a", Restarted, "p0"}, {2, "a", Restarted, "p1"}},
		polls: map[int][]report{5: {{gang: "a", kind: Restarted, affected: 2, suppressed: 1}}},
	}, {
		name: "after a report the next one of the key waits for the window",
		adds: []add{{0, "a", Restarted, "p0"}, {10, "a", Restarted, "p1"}, {30, "a", Restarted, "p2"}},
		polls: map[int][]report{
			5:  {{gang: "a", kind: Restarted, affected: 1}},
			15: nil, // p1 is due at 5 + 60
			64: nil,
			65: {{gang: "a", kind: Restarted, affected: 2}},
		},
	}, {
		name: "kinds and gangs are reported apart",
		adds: []add{{0, "a", Restarted, "p0"}, {0, "a", ImagePullBackOff, "p1"}, {1, "b", Restarted, "p0"}},
		polls: map[int][]report{6: {
			{gang: "a", kind: ImagePullBackOff, affected: 1}, {gang: "a", kind: Restarted, affected: 1}, {gang: "b", kind: Restarted, affected: 1},
		}},
	}, {
		name:  "a key quiet for a window reports at once again after the settle time",
		adds:  []add{{0, "a", Restarted, "p0"}, {200, "a", Restarted, "p1"}},
		polls: map[int][]report{5: {{gang: "a", kind: Restarted, affected: 1}}, 100: nil, 205: {{gang: "a", kind: Restarted, affected: 1}}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAggregator(time.Minute, 5*time.Second)
			var times []int
			for s := range tc.polls {
				times = append(times, s)
			}
			slices.Sort(times)
			next := 0
			for _, s := range times {
				for ; next < len(tc.adds) && tc.adds[next].at <= s; next++ {
					ad := tc.adds[next]
					a.Add(gang(ad.gang, 8), failure(ad.kind, ad.pod, at(ad.at)), at(ad.at))
				}
				got := a.Due(at(s))
				want := tc.polls[s]
				if len(got) != len(want) {
					t.Fatalf("at %ds: %d reports, want %d: %+v", s, len(got), len(want), got)
				}
				for i, w := range want {
					g := got[i]
					if string(g.Gang.UID) != w.gang || g.Kind != w.kind || g.Affected() != w.affected || g.Suppressed != w.suppressed {
						t.Errorf("at %ds report %d = gang %s %s, %d affected, %d suppressed; want %+v",
							s, i, g.Gang.UID, g.Kind, g.Affected(), g.Suppressed, w)
					}
				}
			}
		})
	}
}
