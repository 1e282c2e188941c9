package admission

import (
	"slices"
	"testing"
)

func TestUnqueueable(t *testing.T) {
	base := job("w", "cq", 0, 1, 1, 1)
	base.LocalQueue = "lq"
	cases := []struct {
		name       string
		change     func(*Workload)
		wantReason PendingReason
		wantMsg    string
	}{
		{name: "queueable", change: func(*Workload) {}},
		{name: "deactivated first, whatever its queues", change: func(w *Workload) { w.Inactive, w.LocalQueueState = true, LocalQueueMissing },
			wantReason: Deactivated,
			wantMsg:    "the Workload is deactivated (spec.active is false); it waits until activated: kubectl berth activate workload w -n ns"},
		{name: "missing LocalQueue", change: func(w *Workload) { w.LocalQueueState = LocalQueueMissing }, wantReason: LocalQueueNotFound,
			wantMsg: `LocalQueue "lq" does not exist in namespace "ns": create it, or set the berth.dev/queue-name label to an existing LocalQueue`},
		{name: "held LocalQueue", change: func(w *Workload) { w.LocalQueueState = LocalQueueHold }, wantReason: LocalQueueStopped,
			wantMsg: `LocalQueue "lq" is stopped (stopPolicy Hold); its workloads wait until it is resumed: kubectl berth resume localqueue lq -n ns`},
		{name: "drained LocalQueue", change: func(w *Workload) { w.LocalQueueState = LocalQueueHoldAndDrain }, wantReason: LocalQueueStopped,
			wantMsg: `LocalQueue "lq" is stopped (stopPolicy HoldAndDrain); its workloads wait until it is resumed: kubectl berth resume localqueue lq -n ns`},
		{name: "no namespaceSelector", change: func(w *Workload) { w.NamespaceRefusal = NamespaceNoSelector }, wantReason: NamespaceNotAllowed,
			wantMsg: `ClusterQueue "cq" has no namespaceSelector, which selects no namespace: its administrator sets one that matches namespace "ns" ({} for every namespace), or use another LocalQueue`},
		{name: "namespace not selected", change: func(w *Workload) { w.NamespaceRefusal = NamespaceNotSelected }, wantReason: NamespaceNotAllowed,
			wantMsg: `ClusterQueue "cq" does not accept workloads from namespace "ns": its administrator changes its namespaceSelector, or use another LocalQueue`},
		{name: "a PriorityClass its LocalQueue does not list", change: func(w *Workload) { w.PriorityClassRefused, w.Priority = "urgent", 1000 },
			wantReason: PriorityClassNotAllowed,
			wantMsg: `LocalQueue "lq" of namespace "ns" does not let its workloads take PriorityClass "urgent" (value 1000): ` +
				`name a class of value 0 or less, or none, or ask the platform team to list "urgent" in the LocalQueue's spec.priorityClasses`},
		{name: "a stopped LocalQueue before its classes", change: func(w *Workload) { w.PriorityClassRefused, w.LocalQueueState = "urgent", LocalQueueHold },
			wantReason: LocalQueueStopped,
			wantMsg:    `LocalQueue "lq" is stopped (stopPolicy Hold); its workloads wait until it is resumed: kubectl berth resume localqueue lq -n ns`},
		{name: "another queue's headroom", change: func(w *Workload) { w.ForeignHeadroom = "serving" }, wantReason: HeadroomNotAllowed,
			wantMsg: `the pods tolerate the taint berth.dev/headroom=serving, which keeps ClusterQueue "serving"'s headroom nodes for its own replicas; ` +
				`pods queued in ClusterQueue "cq" may tolerate only berth.dev/headroom=cq: remove that toleration, or tolerate the taints the job needs by key and value`},
		{name: "every queue's headroom", change: func(w *Workload) { w.ForeignHeadroom = AnyHeadroom }, wantReason: HeadroomNotAllowed,
			wantMsg: `the pods tolerate the taint berth.dev/headroom whatever its value (a toleration with operator Exists and that key or no key), ` +
				`so they could take the headroom nodes every ClusterQueue keeps for its own replicas; ` +
				`pods queued in ClusterQueue "cq" may tolerate only berth.dev/headroom=cq: remove that toleration, or tolerate the taints the job needs by key and value`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := base
			tc.change(&w)
			reason, msg := w.Unqueueable()
			if reason != tc.wantReason || msg != tc.wantMsg {
				t.Errorf("Unqueueable() = %s %q, want %s %q", reason, msg, tc.wantReason, tc.wantMsg)
			}
			if reason != "" && (!reason.Unqueueable() || !reason.NeedsChange() || !slices.Contains(PendingReasons(), reason)) {
				t.Errorf("%s: not listed as a reason that needs a change", reason)
			}
		})
	}
}

func TestHeldWorkloads(t *testing.T) {
	inactive := func(w Workload) Workload { w.Inactive = true; return w }
	stoppedLQ := func(w Workload) Workload { w.LocalQueueState = LocalQueueHold; return w }
	cases := []struct {
		name string
		// steps upsert their workloads, then run a cycle each.
		steps [][]Workload
		// wantPending are the reasons reported by each cycle, "name reason".
		wantPending  [][]string
		wantAdmitted [][]string
		wantHeld     bool
	}{
		{name: "an ineligible workload is held and reported once, never admitted",
			steps:       [][]Workload{{inactive(job("a", "cq", 0, 1, 1, 1))}, {inactive(job("a", "cq", 0, 1, 1, 1))}},
			wantPending: [][]string{{"a Deactivated"}, nil}, wantAdmitted: [][]string{nil, nil}, wantHeld: true},
		{name: "a new reason is reported again",
			steps:       [][]Workload{{inactive(job("a", "cq", 0, 1, 1, 1))}, {stoppedLQ(job("a", "cq", 0, 1, 1, 1))}},
			wantPending: [][]string{{"a Deactivated"}, {"a LocalQueueStopped"}}, wantAdmitted: [][]string{nil, nil}, wantHeld: true},
		{name: "an eligible workload again is queued and admitted",
			steps:       [][]Workload{{inactive(job("a", "cq", 0, 1, 1, 1))}, {job("a", "cq", 0, 1, 1, 1)}},
			wantPending: [][]string{{"a Deactivated"}, nil}, wantAdmitted: [][]string{nil, {"a"}}},
		{name: "a held workload leaves room for the others",
			steps:       [][]Workload{{inactive(job("a", "cq", 1, 1, 1, 4)), job("b", "cq", 0, 2, 1, 4)}},
			wantPending: [][]string{{"a Deactivated"}}, wantAdmitted: [][]string{{"b"}}, wantHeld: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, DefaultOptions())
			mustCQ(t, e, newCQ("cq", "", []string{"f"}, []int64{4}))
			for i, ws := range tc.steps {
				mustWL(t, e, ws...)
				res := cycle(t, e)
				var pending []string
				for _, p := range res.Pending {
					pending = append(pending, p.Key.Name+" "+string(p.Reason))
				}
				if !slices.Equal(pending, tc.wantPending[i]) || !slices.Equal(admittedNames(res), tc.wantAdmitted[i]) {
					t.Errorf("cycle %d: pending %v admitted %v, want %v %v", i, pending, admittedNames(res), tc.wantPending[i], tc.wantAdmitted[i])
				}
			}
			if _, held := e.Held(key("a")); held != tc.wantHeld {
				t.Errorf("Held(a) = %v, want %v", held, tc.wantHeld)
			}
			if _, ok := e.Explain(key("a")); ok && tc.wantHeld {
				t.Error("a held workload is explained as queued")
			}
		})
	}
}

func TestHeldWorkloadReleasesItsAdmission(t *testing.T) {
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("cq", "", []string{"f"}, []int64{4}))
	a, b := job("a", "cq", 1, 1, 1, 4), job("b", "cq", 0, 2, 1, 4)
	mustWL(t, e, a, b)
	res := cycle(t, e)
	confirm(t, e, specMap(a, b), res)
	// a's eviction is over and it was deactivated meanwhile: it is held and
	// its quota goes to b.
	a.Inactive = true
	mustWL(t, e, a)
	res = cycle(t, e)
	if !slices.Equal(admittedNames(res), []string{"b"}) {
		t.Errorf("admitted %v, want [b]", admittedNames(res))
	}
	if u, ok := pendingReason(res, "a"); !ok || u.Reason != Deactivated {
		t.Errorf("a's pending update = %+v, want Deactivated", u)
	}
	e.DeleteWorkload(key("a"))
	if _, held := e.Held(key("a")); held {
		t.Error("a deleted workload is still held")
	}
}
