package admission

import (
	"reflect"
	"slices"
	"testing"
)

// queueOf returns five pending one-GPU workloads of ClusterQueue "a" in two
// LocalQueues, behind a running workload that holds its one GPU of quota.
func queueOf(t *testing.T) *Engine {
	t.Helper()
	e := newEngine(t, DefaultOptions())
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{1}))
	mustWL(t, e, running(job("busy", "a", 100, 0, 1, 1), "a", 1))
	for _, w := range []struct {
		name, lq string
		prio     int32
		created  int64
	}{{"w1", "x", 0, 1}, {"w2", "y", 5, 2}, {"w3", "x", 5, 3}, {"w4", "y", 0, 4}, {"w5", "x", 9, 5}} {
		wl := job(w.name, "a", w.prio, w.created, 1, 1)
		wl.LocalQueue = w.lq
		mustWL(t, e, wl)
	}
	cycle(t, e)
	return e
}

func keysOf(items []PendingWorkload) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Key.Name)
	}
	return out
}

func TestPendingPages(t *testing.T) {
	e := queueOf(t)
	for _, tc := range []struct {
		name      string
		q         PendingQuery
		want      []string
		lqPos     []int
		wantTotal int
	}{
		{"whole queue, priority then age", PendingQuery{ClusterQueue: "a"}, []string{"w5", "w2", "w3", "w1", "w4"}, []int{0, 0, 1, 2, 1}, 5},
		{"a page", PendingQuery{ClusterQueue: "a", Offset: 1, Limit: 2}, []string{"w2", "w3"}, []int{0, 1}, 5},
		{"past the end", PendingQuery{ClusterQueue: "a", Offset: 9}, nil, nil, 5},
		{"one LocalQueue", PendingQuery{ClusterQueue: "a", Namespace: "ns", LocalQueue: "y"}, []string{"w2", "w4"}, []int{0, 1}, 2},
		{"a page of one LocalQueue", PendingQuery{ClusterQueue: "a", Namespace: "ns", LocalQueue: "x", Offset: 1, Limit: 1}, []string{"w3"}, []int{1}, 3},
		{"a LocalQueue of another namespace", PendingQuery{ClusterQueue: "a", Namespace: "other", LocalQueue: "x"}, nil, nil, 0},
		{"one workload by name, whatever the page", PendingQuery{ClusterQueue: "a", Offset: 4, Limit: 1,
			Workload: WorkloadKey{Namespace: "ns", Name: "w3"}}, []string{"w3"}, []int{1}, 5},
		{"one workload of one LocalQueue", PendingQuery{ClusterQueue: "a", Namespace: "ns", LocalQueue: "y",
			Workload: WorkloadKey{Namespace: "ns", Name: "w4"}}, []string{"w4"}, []int{1}, 2},
		{"a workload of another LocalQueue is not found", PendingQuery{ClusterQueue: "a", Namespace: "ns", LocalQueue: "y",
			Workload: WorkloadKey{Namespace: "ns", Name: "w3"}}, nil, nil, 2},
		{"a workload of another namespace is not found", PendingQuery{ClusterQueue: "a",
			Workload: WorkloadKey{Namespace: "other", Name: "w3"}}, nil, nil, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, ok := e.Pending(tc.q)
			if !ok {
				t.Fatal("queue a unknown")
			}
			if got := keysOf(page.Items); !slices.Equal(got, tc.want) || page.Total != tc.wantTotal {
				t.Fatalf("got %v (total %d), want %v (total %d)", got, page.Total, tc.want, tc.wantTotal)
			}
			for i, it := range page.Items {
				if it.PositionInLocalQueue != tc.lqPos[i] || it.Explanation.Position != it.PositionInClusterQueue {
					t.Errorf("%s: local position %d, want %d; explanation at %d, queue position %d",
						it.Key.Name, it.PositionInLocalQueue, tc.lqPos[i], it.Explanation.Position, it.PositionInClusterQueue)
				}
				if it.Explanation.Reason != InsufficientQuota || it.Explanation.Message == "" || len(it.Explanation.Shortfalls) != 1 {
					t.Errorf("%s: explanation %+v, want insufficient quota with its shortfall", it.Key.Name, it.Explanation)
				}
			}
		})
	}
	if _, ok := e.Pending(PendingQuery{ClusterQueue: "nope"}); ok {
		t.Fatal("an unknown ClusterQueue listed")
	}
}

// TestPendingOrderIsAdmissionOrder: granting one GPU at a time admits the
// workloads in exactly the order Pending lists them, and each listing agrees
// with Explain.
func TestPendingOrderIsAdmissionOrder(t *testing.T) {
	e := queueOf(t)
	page, _ := e.Pending(PendingQuery{ClusterQueue: "a"})
	listed := keysOf(page.Items)
	for i, it := range page.Items {
		ex, ok := e.Explain(it.Key)
		if !ok || ex.Position != i || ex.Reason != it.Explanation.Reason || ex.Message != it.Explanation.Message {
			t.Fatalf("%s: Explain %+v disagrees with the listing %+v", it.Key.Name, ex, it.Explanation)
		}
	}
	var admitted []string
	for gpus := int64(2); gpus <= int64(len(listed))+1; gpus++ {
		mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{gpus}))
		for _, a := range cycle(t, e).Admitted {
			admitted = append(admitted, a.Key.Name)
		}
	}
	if !slices.Equal(admitted, listed) {
		t.Fatalf("admitted %v, listed %v", admitted, listed)
	}
	if page, _ := e.Pending(PendingQuery{ClusterQueue: "a"}); page.Total != 0 {
		t.Fatalf("%d still listed after all were admitted", page.Total)
	}
}

// TestPendingInParts: listing the order and then explaining each entry, as
// a caller that releases the lock in between does, gives what Pending gives;
// an entry admitted in between is reported as gone and left unchanged.
func TestPendingInParts(t *testing.T) {
	e := queueOf(t)
	q := PendingQuery{ClusterQueue: "a", Namespace: "ns", LocalQueue: "x"}
	whole, _ := e.Pending(q)
	order, ok := e.PendingOrder(q)
	if !ok || order.Total != whole.Total || order.FairShare != whole.FairShare || len(order.Items) != len(whole.Items) {
		t.Fatalf("order %+v, want the page of %+v", order, whole)
	}
	for i, it := range order.Items {
		if it.Explanation.Reason != "" {
			t.Fatalf("%s: PendingOrder explained it", it.Key.Name)
		}
		got, still := e.ExplainPending(it, order.FairShare)
		if !still || !reflect.DeepEqual(got, whole.Items[i]) {
			t.Fatalf("%s: explained apart %+v, in the page %+v", it.Key.Name, got, whole.Items[i])
		}
	}
	mustCQ(t, e, newCQ("a", "", []string{"h200"}, []int64{2}))
	first := order.Items[0]
	if a := cycle(t, e).Admitted; len(a) != 1 || a[0].Key != first.Key {
		t.Fatalf("admitted %v, want %s", a, first.Key)
	}
	if e.IsPending(first.Key) || !e.IsPending(order.Items[1].Key) {
		t.Fatalf("IsPending: %s admitted, %s waiting", first.Key.Name, order.Items[1].Key.Name)
	}
	if got, still := e.ExplainPending(first, order.FairShare); still || !reflect.DeepEqual(got, first) {
		t.Fatalf("an admitted workload explained as pending: %+v", got)
	}
}

// TestPendingPageSharesNothing: a caller that edits the booking record of a
// listed workload changes neither the record the engine keeps nor the
// failed domains it avoids when it places the gang again.
func TestPendingPageSharesNothing(t *testing.T) {
	e := provEngine(t, ProvisionNever, []Node{rackNode("n1", "a", "r1", 0)})
	d := rackDomain("a", "r1")
	w := gang("g", 2, 8, TopologyRequired, rackKey)
	w.Booking = &Booking{Attempt: 1, Failures: 1, State: BookingCapacityNotFound, Flavor: "h200",
		Domain: &d, FailedDomains: []TopologyAssignment{rackDomain("a", "r1")}}
	mustWL(t, e, w)
	page, ok := e.PendingOrder(PendingQuery{ClusterQueue: "a"})
	if !ok || len(page.Items) != 1 || page.Items[0].Booking == nil {
		t.Fatalf("listed %+v, want g with its booking record", page.Items)
	}
	bk := page.Items[0].Booking
	bk.FailedDomains[0].Domain[1] = "r2"
	bk.Domain.Domain[1] = "r2"
	in := e.workloads[key("g")]
	if in.avoid[0].Domain[1] != "r1" || in.bk.Domain.Domain[1] != "r1" || in.bk.FailedDomains[0].Domain[1] != "r1" {
		t.Fatalf("the caller's edit reached the engine: avoids %v, record's domain %v", in.avoid[0].Domain, in.bk.Domain.Domain)
	}
}
