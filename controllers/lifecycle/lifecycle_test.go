package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
)

const scaleUpClass = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

func sampleAdmission() *berthv1.Admission {
	return &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{
		{Name: "main", Count: 4, Flavors: map[corev1.ResourceName]string{"nvidia.com/gpu": "h200"}},
	}}
}

// rack is rack r1 of zone z1 of flavor h200.
func rack() *berthv1.TopologyAssignment {
	return &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack"}, Values: []string{"z1", "r1"}}
}

func booked() *berthv1.Admission {
	a := sampleAdmission()
	a.Topology = rack()
	a.Provisioning = &berthv1.AdmissionProvisioning{ClassName: scaleUpClass, NewNodes: []berthv1.PoolNodes{{Pool: "r1", Nodes: 2}}}
	return a
}

func newWorkload() *berthv1.Workload {
	return &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", Generation: 3}}
}

// must applies a transition that must be allowed.
func must(t *testing.T, wl *berthv1.Workload, tr Transition) *berthv1.Workload {
	t.Helper()
	if err := Apply(wl, tr, t0); err != nil {
		t.Fatalf("%s: %v", tr.Name(), err)
	}
	return wl
}

// inPhase returns a workload in phase p, reached through transitions only.
func inPhase(t *testing.T, p Phase) *berthv1.Workload {
	t.Helper()
	wl := newWorkload()
	reserve := Reserve{Admission: booked(), Generation: 3, Attempt: 1, Flavor: "h200", MaxAttempts: 3, Message: "quota"}
	switch p {
	case Pending:
		return must(t, wl, Queue{Reason: berthv1.ReasonInsufficientQuota, Message: "short of GPUs"})
	case GaveUp:
		must(t, wl, reserve)
		return must(t, wl, FailBooking{Failure: BookingFailure{Attempt: 1, State: berthv1.ProvisioningFailed, Failures: 3, MaxAttempts: 3, GaveUp: true}})
	case Reserved:
		return must(t, wl, reserve)
	case Admitted:
		return must(t, wl, Admit{Admission: sampleAdmission(), Generation: 3, Message: "admitted by cq"})
	case Running:
		must(t, wl, reserve)
		must(t, wl, Provision{Attempt: 1, Detail: "nodes created"})
		return must(t, wl, PodsReady{Total: 4})
	case Evicting:
		must(t, wl, Admit{Admission: sampleAdmission(), Generation: 3})
		return must(t, wl, Evict{Reason: berthv1.ReasonPreempted, Message: "preempted"})
	case Finished:
		must(t, wl, Admit{Admission: sampleAdmission(), Generation: 3})
		return must(t, wl, Finish{Succeeded: true, Message: "done"})
	}
	t.Fatalf("no fixture for phase %s", p)
	return nil
}

var allPhases = []Phase{Pending, GaveUp, Reserved, Admitted, Running, Evicting, Finished}

// TestTransitions applies every transition in every phase: allowed ones
// lead to the expected phase, all others are refused and change nothing.
func TestTransitions(t *testing.T) {
	failure := BookingFailure{Attempt: 1, State: berthv1.ProvisioningCapacityNotFound, Failures: 1, MaxAttempts: 3,
		FailedDomains: []berthv1.TopologyAssignment{*rack()}, RetryAfter: &t1, Detail: "found no capacity for 5m0s"}
	cases := []struct {
		t    Transition
		want map[Phase]Phase // phase before → phase after; absent: refused
	}{
		{Queue{Reason: berthv1.ReasonTopologyUnavailable, Message: "no rack"}, map[Phase]Phase{Pending: Pending}},
		{Admit{Admission: sampleAdmission(), Generation: 3, Message: "m"}, map[Phase]Phase{Pending: Admitted}},
		{Reserve{Admission: booked(), Generation: 3, Attempt: 2, Flavor: "h200", MaxAttempts: 3}, map[Phase]Phase{Pending: Reserved}},
		{NoteBooking{Attempt: 1, CapacityNotFoundSince: &t0, Message: "no capacity"}, map[Phase]Phase{Reserved: Reserved}},
		{Provision{Attempt: 1}, map[Phase]Phase{Reserved: Admitted}},
		{FailBooking{Failure: failure}, map[Phase]Phase{Reserved: Pending}},
		{Evict{Reason: berthv1.ReasonPreempted, Message: "p"}, map[Phase]Phase{Reserved: Pending, Admitted: Evicting, Running: Evicting}},
		{Requeue{Message: "stopped"}, map[Phase]Phase{Evicting: Pending}},
		{Shrink{Counts: map[string]int32{"main": 2}}, map[Phase]Phase{Admitted: Admitted, Running: Running}},
		{Finish{Succeeded: false, Message: "failed"}, map[Phase]Phase{Pending: Finished, GaveUp: Finished, Reserved: Finished,
			Admitted: Finished, Running: Finished, Evicting: Finished}},
		{PodsReady{Total: 4}, map[Phase]Phase{Admitted: Running}},
		{HoldPods{Pods: []HeldPod{{Name: "extra", Why: "not a member"}}}, map[Phase]Phase{Pending: Pending, GaveUp: GaveUp,
			Reserved: Reserved, Admitted: Admitted, Running: Running, Evicting: Evicting}},
	}
	for _, tc := range cases {
		for _, from := range allPhases {
			t.Run(tc.t.Name()+"/"+string(from), func(t *testing.T) {
				wl := inPhase(t, from)
				before := wl.DeepCopy()
				err := Apply(wl, tc.t, t1)
				want, allowed := tc.want[from]
				if !allowed {
					var refused *RefusedError
					if !errors.As(err, &refused) {
						t.Fatalf("want refused, got %v (phase %s)", err, PhaseOf(wl))
					}
					if !equalStatus(before, wl) {
						t.Fatalf("a refused transition changed the status")
					}
					return
				}
				if err != nil {
					t.Fatalf("want %s, refused: %v", want, err)
				}
				if got := PhaseOf(wl); got != want {
					t.Fatalf("phase %s, want %s", got, want)
				}
				checkConsistent(t, wl)
			})
		}
	}
}

func equalStatus(a, b *berthv1.Workload) bool {
	return meta.IsStatusConditionTrue(a.Status.Conditions, berthv1.ConditionAdmitted) == meta.IsStatusConditionTrue(b.Status.Conditions, berthv1.ConditionAdmitted) &&
		len(a.Status.Conditions) == len(b.Status.Conditions) && (a.Status.Admission == nil) == (b.Status.Admission == nil) &&
		PhaseOf(a) == PhaseOf(b)
}

// checkConsistent checks that the conditions agree with the phase.
func checkConsistent(t *testing.T, wl *berthv1.Workload) {
	t.Helper()
	phase := PhaseOf(wl)
	if phase == Finished {
		return
	}
	qr := Condition(wl, berthv1.ConditionQuotaReserved)
	ad := Condition(wl, berthv1.ConditionAdmitted)
	if qr == nil || ad == nil {
		t.Fatalf("phase %s without QuotaReserved and Admitted: %v", phase, wl.Status.Conditions)
	}
	if got, want := qr.Status == metav1.ConditionTrue, HoldsQuota(phase); got != want {
		t.Errorf("phase %s: QuotaReserved=%s", phase, qr.Status)
	}
	if got, want := ad.Status == metav1.ConditionTrue, MayRun(phase); got != want {
		t.Errorf("phase %s: Admitted=%s", phase, ad.Status)
	}
	if HoldsQuota(phase) != (wl.Status.Admission != nil) {
		t.Errorf("phase %s with admission %v", phase, wl.Status.Admission)
	}
	if ev := Condition(wl, berthv1.ConditionEvicted); (phase == Evicting) != (ev != nil && ev.Status == metav1.ConditionTrue) && HoldsQuota(phase) {
		t.Errorf("phase %s with Evicted %v", phase, ev)
	}
	for _, c := range wl.Status.Conditions {
		if c.ObservedGeneration != wl.Generation || c.LastTransitionTime.IsZero() || c.Reason == "" {
			t.Errorf("condition %s: generation %d, time %v, reason %q", c.Type, c.ObservedGeneration, c.LastTransitionTime, c.Reason)
		}
	}
}

func TestAdmissionsDecidedForAnotherSpecAreRefused(t *testing.T) {
	for _, tr := range []Transition{
		Admit{Admission: sampleAdmission(), Generation: 2},
		Reserve{Admission: booked(), Generation: 4, Attempt: 1},
	} {
		wl := inPhase(t, Pending)
		err := Apply(wl, tr, t1)
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Why, "generation") {
			t.Errorf("%s for another generation: %v", tr.Name(), err)
		}
	}
	wl := inPhase(t, Pending)
	wl.DeletionTimestamp = &t1
	if err := Apply(wl, Admit{Admission: sampleAdmission(), Generation: 3}, t1); err == nil {
		t.Errorf("admitted a workload being deleted")
	}
}

func TestBookingRecord(t *testing.T) {
	wl := inPhase(t, Reserved)
	p := wl.Status.Provisioning
	if p.Attempt != 1 || p.RequestName != "wl-1" || p.ClassName != scaleUpClass || p.Flavor != "h200" ||
		p.State != berthv1.ProvisioningPending || p.StartTime == nil || p.Topology == nil {
		t.Fatalf("reserve recorded %+v", p)
	}
	if ad := Condition(wl, berthv1.ConditionAdmitted); ad.Reason != string(berthv1.ReasonWaitingForCapacity) || !strings.Contains(ad.Message, "wl-1") {
		t.Fatalf("Admitted: %+v", ad)
	}

	must(t, wl, NoteBooking{Attempt: 1, CapacityNotFoundSince: &t0, Message: "no capacity yet"})
	must(t, wl, NoteBooking{Attempt: 1, CapacityNotFoundSince: &t1, Message: "still none"})
	if got := wl.Status.Provisioning.CapacityNotFoundSince; got == nil || !got.Equal(&t0) {
		t.Fatalf("capacityNotFoundSince %v, want the first answer's %v", got, t0)
	}
	if err := Apply(wl, NoteBooking{Attempt: 2}, t1); err == nil {
		t.Fatalf("noted an answer for another attempt")
	}

	failure := BookingFailure{Attempt: 1, State: berthv1.ProvisioningCapacityNotFound, Failures: 1, MaxAttempts: 3,
		FailedDomains: []berthv1.TopologyAssignment{*rack()}, RetryAfter: &t1, Detail: "found no capacity for 5m0s"}
	must(t, wl, FailBooking{Failure: failure})
	p = wl.Status.Provisioning
	if wl.Status.Admission != nil || p.State != berthv1.ProvisioningCapacityNotFound || p.Failures != 1 || len(p.FailedDomains) != 1 || p.RetryAfter == nil {
		t.Fatalf("failure recorded %+v", p)
	}
	qr := Condition(wl, berthv1.ConditionQuotaReserved)
	if qr.Reason != string(berthv1.ReasonProvisioningFailed) || !strings.Contains(qr.Message, "1 of 3") || !strings.Contains(qr.Message, "next attempt not before") {
		t.Fatalf("QuotaReserved: %+v", qr)
	}

	By := func(tr Transition) { must(t, wl, tr) }
	By(Reserve{Admission: booked(), Generation: 3, Attempt: 2, Flavor: "h200", MaxAttempts: 3})
	if p := wl.Status.Provisioning; p.Attempt != 2 || p.RequestName != "wl-2" || p.Failures != 1 || len(p.FailedDomains) != 1 || p.CapacityNotFoundSince != nil {
		t.Fatalf("second attempt %+v", p)
	}
	if err := Apply(wl, Provision{Attempt: 1}, t1); err == nil {
		t.Fatalf("provisioned a superseded attempt")
	}
	// The engine keeps the failures in a row where only pods Ready in time
	// prove the booking good.
	By(Provision{Attempt: 2, Failures: 1, Detail: "Capacity is found in the cluster"})
	if p := wl.Status.Provisioning; p.State != berthv1.ProvisioningProvisioned || p.Failures != 1 || wl.Status.Admission.Provisioning == nil {
		t.Fatalf("provisioned %+v, admission %+v", p, wl.Status.Admission)
	}
	By(PodsReady{Total: 2})
	if p := wl.Status.Provisioning; p.Failures != 0 {
		t.Fatalf("pods Ready in time left %d failures in a row", p.Failures)
	}
}

func TestFailedBookingOfAStartedGangEvictsIt(t *testing.T) {
	wl := inPhase(t, Running)
	must(t, wl, Evict{Reason: berthv1.ReasonPodsNotReady, Message: "3 of 4 pods Ready", Booking: &BookingFailure{
		Attempt: 1, State: berthv1.ProvisioningPodsNotReady, Failures: 1, MaxAttempts: 3, RetryAfter: &t1,
		FailedDomains: []berthv1.TopologyAssignment{*rack()},
	}})
	if PhaseOf(wl) != Evicting || wl.Status.Provisioning.State != berthv1.ProvisioningPodsNotReady {
		t.Fatalf("phase %s, booking %+v", PhaseOf(wl), wl.Status.Provisioning)
	}
	if c := Condition(wl, berthv1.ConditionPodsReady); c.Status != metav1.ConditionFalse {
		t.Fatalf("PodsReady %+v", c)
	}
	must(t, wl, Requeue{Message: "stopped"})
	if PhaseOf(wl) != Pending || Condition(wl, berthv1.ConditionEvicted).Reason != string(berthv1.ReasonRequeued) ||
		Condition(wl, berthv1.ConditionAdmitted).Reason != string(berthv1.ReasonRequeued) {
		t.Fatalf("requeued: %v", wl.Status.Conditions)
	}
	if wl.Status.Provisioning.RetryAfter == nil {
		t.Fatalf("the retry time was lost on requeue")
	}
}

func TestEvictingAGangWaitingForCapacityReleasesItsQuota(t *testing.T) {
	wl := inPhase(t, Reserved)
	must(t, wl, Evict{Reason: berthv1.ReasonPreempted, Message: "preempted to admit ns/hi"})
	if PhaseOf(wl) != Pending || wl.Status.Admission != nil || wl.Status.Provisioning.State != berthv1.ProvisioningCancelled {
		t.Fatalf("phase %s, booking %+v", PhaseOf(wl), wl.Status.Provisioning)
	}
	if c := Condition(wl, berthv1.ConditionEvicted); c.Reason != string(berthv1.ReasonPreempted) || c.Status != metav1.ConditionTrue {
		t.Fatalf("Evicted %+v", c)
	}
	if err := Apply(inPhase(t, Reserved), Evict{Reason: berthv1.ReasonPodsNotReady, Booking: &BookingFailure{Attempt: 1}}, t1); err == nil {
		t.Fatalf("a booking failure of a gang that never started was taken as an eviction")
	}
}

func TestRequeueAfterGivingUp(t *testing.T) {
	wl := inPhase(t, Running)
	must(t, wl, Evict{Reason: berthv1.ReasonCapacityRevoked, Message: "revoked", Booking: &BookingFailure{
		Attempt: 1, State: berthv1.ProvisioningCapacityRevoked, Failures: 3, MaxAttempts: 3, GaveUp: true,
	}})
	must(t, wl, Requeue{Message: "stopped"})
	if PhaseOf(wl) != GaveUp || Condition(wl, berthv1.ConditionQuotaReserved).Reason != string(berthv1.ReasonProvisioningGaveUp) {
		t.Fatalf("phase %s, %v", PhaseOf(wl), wl.Status.Conditions)
	}
}

func TestNamesFitTheAPI(t *testing.T) {
	long := strings.Repeat("a", 260)
	for _, n := range []string{RequestName(long, 7), ShortName(long)} {
		if len(n) > maxNameLength {
			t.Errorf("%d characters", len(n))
		}
	}
	if RequestName(long, 1) == RequestName(long, 2) {
		t.Errorf("two attempts share a request name")
	}
	if got := RequestName("wl", 3); got != "wl-3" {
		t.Errorf("RequestName = %q", got)
	}
	if got := DomainString(rack()); got != "zone=z1,rack=r1" {
		t.Errorf("DomainString = %q", got)
	}
}

// TestReadmissionAfterEviction: a requeued workload admitted again — on
// existing capacity, or through a booking — is admitted, not evicting.
func TestReadmissionAfterEviction(t *testing.T) {
	requeued := func() *berthv1.Workload {
		wl := inPhase(t, Evicting)
		return must(t, wl, Requeue{Message: "stopped"})
	}
	for _, tc := range []struct {
		name string
		ts   []Transition
		want Phase
	}{
		{"admitted", []Transition{Admit{Admission: sampleAdmission(), Generation: 3, Message: "again"}}, Admitted},
		{"reserved", []Transition{Reserve{Admission: booked(), Generation: 3, Attempt: 1, Flavor: "h200", MaxAttempts: 3}}, Reserved},
		{"provisioned", []Transition{Reserve{Admission: booked(), Generation: 3, Attempt: 1, Flavor: "h200", MaxAttempts: 3}, Provision{Attempt: 1}}, Admitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := requeued()
			for _, tr := range tc.ts {
				must(t, wl, tr)
			}
			if got := PhaseOf(wl); got != tc.want {
				t.Fatalf("phase %s, want %s", got, tc.want)
			}
			checkConsistent(t, wl)
			if c := Condition(wl, berthv1.ConditionEvicted); c.Status != metav1.ConditionFalse {
				t.Fatalf("Evicted %+v after admission", c)
			}
		})
	}
}

// TestHoldPods: the held pods are named (ten at most) in PodsHeld, and the
// condition goes once none is held.
func TestHoldPods(t *testing.T) {
	wl := inPhase(t, Running)
	var pods []HeldPod
	for i := range 12 {
		pods = append(pods, HeldPod{Name: fmt.Sprintf("p%d", i), Why: "beyond the admitted count"})
	}
	must(t, wl, HoldPods{Pods: pods})
	c := Condition(wl, berthv1.ConditionPodsHeld)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(berthv1.ReasonPodsHeld) {
		t.Fatalf("PodsHeld %+v", c)
	}
	want := "12 pod(s) stay gated: p0 (beyond the admitted count); "
	if !strings.HasPrefix(c.Message, want) || !strings.HasSuffix(c.Message, "p9 (beyond the admitted count); and 2 more") ||
		strings.Contains(c.Message, "p10") {
		t.Fatalf("message %q", c.Message)
	}
	if PhaseOf(wl) != Running {
		t.Fatalf("holding pods changed the phase to %s", PhaseOf(wl))
	}
	must(t, wl, HoldPods{})
	if c := Condition(wl, berthv1.ConditionPodsHeld); c != nil {
		t.Fatalf("PodsHeld %+v after none is held", c)
	}
	checkConsistent(t, wl)
}
