// Package admission is berth's decision engine: it decides which pending workloads
// (gangs) are admitted, with which flavors, and which admitted workloads must be
// preempted. It is pure Go: no Kubernetes client or types, no goroutines, no clock
// reads (time is an input of Cycle), no global state and no feature gates (plain
// fields in Options).
//
// # Shape
//
// The caller (the controller) feeds events — UpsertClusterQueue, DeleteClusterQueue,
// UpsertWorkload, DeleteWorkload, ReportBooking, ReportChange — and calls Cycle,
// which returns a plain Result: admissions to persist, victims to evict, booking
// decisions, other evictions (drains, deactivations, changed jobs), and pending
// statuses that changed, including those of workloads that cannot be queued at all.
// Whether a workload may be queued, and whether it must be evicted, is decided from
// plain facts the caller resolves from its API objects (Workload.Inactive,
// LocalQueueState, NamespaceRefusal, ClusterQueue.Drain). The caller applies the
// Result; a write that fails is undone with Rollback. After a
// restart the engine is rebuilt by upserting every object; workloads that carry an
// Admission count as usage and are never admitted twice.
//
// # Parts
//
// The Engine owns the workloads and sequences a cycle; each concern is a part
// with its own state, holding pointers to the parts it reads:
//
//   - names (names.go): interned flavor and resource names; compiling API
//     values into the interned form; messages.
//   - clusterQueues (quota.go, clusterqueue.go): ClusterQueues and cohorts, their
//     compiled quota, usage and queues of workloads; what a cohort's members park,
//     so that a cycle passes over members a release cannot help (cohortwake.go);
//     each queue's flavors' node labels, and which pods' own node constraints
//     rule a flavor out (flavormatch.go).
//     A release wakes the cohort, not each member; the cycle takes, in
//     fair-share order, the queues with work of their own and the members a
//     release could help, read from each cohort's wake order without reading
//     the members themselves (wakeorder.go, cyclework.go).
//   - queueOrder (parked.go): the order within a queue — which pending workloads a
//     cycle tries, parking, StrictFIFO's head, BestEffortFIFO's skips and reservations.
//   - fairSharing (fairshare.go, lqfair.go, index.go): the order between queues and
//     between LocalQueues.
//   - topology (topologystate.go, topology.go, placement.go, fallback.go): flavors'
//     levels, nodes and pools, what admissions reserved, where a gang fits, and
//     which flavor a topology gang falls back to when its first has no room.
//   - preemption (preempt.go; preempt_topology.go, preempt_victims.go and
//     preempt_hold.go for gangs that need a domain): victims, the quota and
//     capacity held for a preemptor, and readying it when they are gone.
//   - bookings (bookingstate.go, booking.go, provision.go): capacity bookings, the
//     autoscaler's answers and their deadlines, and the pods-ready deadline.
//   - eligibility (eligibility.go): pending workloads that cannot be queued at
//     all, held out of every queue, and their reasons.
//   - evictions (evictions.go): evictions decided from the caller's facts and
//     reported job changes.
//   - wakes (wakes.go): making workloads that waited for topology capacity
//     candidates again when capacity changed.
//
// A workload's state (wl) is one record per concern embedded in it (wlQueueing,
// wlFair, wlTopology, wlBooking, wlPreemption, wlEviction), declared with the part
// that owns it.
// TestDecisionsUnchanged replays generated inputs and compares every decision with
// those recorded in testdata/decisions, so that a change to the structure is shown
// to decide the same.
//
// # Concurrency contract
//
// An Engine is not safe for concurrent use: the caller serialises all calls. Results
// and Explanations are fresh values the caller may keep and modify.
//
// # Design trade-offs
//
//   - Incremental ordered state. Pending workloads of each ClusterQueue live in a
//     github.com/google/btree BTreeG ordered by priority, creation time and key;
//     admitted workloads in another, in preemption-victim order; ClusterQueues with
//     pending work in a tenant index ordered by fair-share state. All are updated on
//     every upsert, admission, finish and eviction, never rebuilt per cycle. Every
//     order ends on a unique key, so the engine is deterministic: the same calls in
//     the same order give the same results.
//   - Fresh sets instead of rescans. Each ClusterQueue keeps the subset of pending
//     workloads whose outcome may have changed since they were last evaluated ("fresh":
//     new or changed workloads, or all of them after capacity was released in the
//     queue's cohort or quotas changed). A cycle examines only fresh workloads, so a
//     cycle in which nothing changed costs O(released cohorts), however many are pending. "All
//     fresh" is a lazy copy-on-write Clone of the pending tree: O(1) to take.
//   - Within one cycle capacity only shrinks (a cycle admits and proposes evictions,
//     it never releases), which is what lets a queue leave the cycle for good as soon
//     as nothing more of it fits, and what makes many admissions per cycle safe.
//   - Preemption what-ifs run on the live counters (apply, check, revert) rather than
//     on a copied snapshot: a victim search touches O(victims × resources) counters,
//     and copying a snapshot would cost more than the search. The tenant index is
//     cloned copy-on-write once per cycle as the cycle's working set.
//   - Integer arithmetic only. Amounts are int64 milli-units bounded by MaxAmount;
//     shares are integer parts per billion computed with 128-bit intermediates, so
//     results never depend on floating-point rounding.
//   - "Does not fit" is a result (a PendingReason with a message); error is only for
//     invalid input, which leaves the engine unchanged.
//
// docs/admission.md describes the rules (quota, cohorts, flavor choice, queueing
// strategies, anti-starvation, fair sharing, preemption) and how they differ from
// Kueue.
package admission
