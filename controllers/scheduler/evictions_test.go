package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/metrics"
)

const ns = "team-a"

func testCQ(opts ...func(*berthv1.ClusterQueue)) *berthv1.ClusterQueue {
	cq := &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: berthv1.ClusterQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{},
		ResourceGroups: []berthv1.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []berthv1.FlavorQuotas{{Name: "f", Resources: []berthv1.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}}}}},
	}}
	for _, o := range opts {
		o(cq)
	}
	return cq
}

func testLQ(p berthv1.StopPolicy) *berthv1.LocalQueue {
	return &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lq"},
		Spec: berthv1.LocalQueueSpec{ClusterQueue: "cq", StopPolicy: p}}
}

// testWL is a Workload of a Job, queued in lq, asking for one CPU.
func testWL(opts ...func(*berthv1.Workload)) *berthv1.Workload {
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w", Generation: 1, CreationTimestamp: metav1.Unix(1, 0),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}}},
		Spec: berthv1.WorkloadSpec{QueueName: "lq", PodSets: []berthv1.PodSet{{Name: "main", Count: 1,
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
	}
	for _, o := range opts {
		o(wl)
	}
	return wl
}

func admittedWL(wl *berthv1.Workload) {
	a := &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main", Count: 1,
		Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "f"}}}}
	if err := lifecycle.Apply(wl, lifecycle.Admit{Admission: a, Generation: wl.Generation, Message: "admitted by cq"}, metav1.Unix(2, 0)); err != nil {
		panic(err)
	}
}

func inactiveWL(wl *berthv1.Workload) { wl.Spec.Active = ptr.To(false) }

// testJob is the job of testWL, as the job reconciler reports it.
func testJob() *batchv1.Job {
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"}}
}

// decisionCase is API objects fed to the scheduler, and what it must write.
type decisionCase struct {
	name string
	objs []client.Object
	// report is told the scheduler after the objects are fed.
	report       func(s *Scheduler)
	wantCond     string // the condition written: Evicted, or QuotaReserved
	wantReason   berthv1.WorkloadReason
	wantMsg      string
	wantEvicted  string // the reason counted against cq
	wantEvents   []string
	wantEventMsg string
}

// TestDecisionsWritten feeds the scheduler API objects, runs a cycle, and
// checks that it writes what the engine decided from their facts — the
// eviction or the pending reason — with its metric and events.
func TestDecisionsWritten(t *testing.T) {
	cases := []decisionCase{
		{name: "a deactivated admitted workload is evicted, counted and announced on the Workload",
			objs:     []client.Object{testCQ(), testLQ(""), testWL(admittedWL, inactiveWL)},
			wantCond: berthv1.ConditionEvicted, wantReason: berthv1.ReasonDeactivated, wantMsg: "the Workload was deactivated (spec.active is false)",
			wantEvicted: "Deactivated", wantEvents: []string{"Deactivated Workload"}},
		{name: "a drained LocalQueue's admitted workload is evicted and counted",
			objs:     []client.Object{testCQ(), testLQ(berthv1.StopPolicyHoldAndDrain), testWL(admittedWL)},
			wantCond: berthv1.ConditionEvicted, wantReason: berthv1.ReasonLocalQueueStopped, wantMsg: "LocalQueue lq is stopped with stopPolicy HoldAndDrain",
			wantEvicted: "LocalQueueStopped"},
		{name: "a drained ClusterQueue's admitted workload is evicted and counted",
			objs: []client.Object{testCQ(func(cq *berthv1.ClusterQueue) { cq.Spec.StopPolicy = berthv1.StopPolicyHoldAndDrain }),
				testLQ(""), testWL(admittedWL)},
			wantCond: berthv1.ConditionEvicted, wantReason: berthv1.ReasonClusterQueueStopped, wantMsg: "ClusterQueue cq is stopped with stopPolicy HoldAndDrain",
			wantEvicted: "ClusterQueueStopped"},
		{name: "a job that grew is evicted and announced on the job; a re-queue for a change is not counted",
			objs: []client.Object{testCQ(), testLQ(""), testWL(admittedWL)},
			report: func(s *Scheduler) {
				s.ReportChange(admission.WorkloadKey{Namespace: ns, Name: "w"}, admission.Change{Kind: admission.ChangeGrew, Detail: "pod set main: 2 pods, admitted for 1"}, testJob())
			},
			wantCond: berthv1.ConditionEvicted, wantReason: berthv1.ReasonResized,
			wantMsg:    "the job grew (pod set main: 2 pods, admitted for 1): it is stopped and queued again for its new size",
			wantEvents: []string{"Resized Job"}, wantEventMsg: "grew (pod set main: 2 pods, admitted for 1): stopped and queued again for all of its pods"},
		{name: "a running job that became invalid is evicted and its stop announced on the job",
			objs: []client.Object{testCQ(), testLQ(""), testWL(admittedWL)},
			report: func(s *Scheduler) {
				s.ReportChange(admission.WorkloadKey{Namespace: ns, Name: "w"}, admission.Change{Kind: admission.ChangeInvalid, Detail: "pods disagree"}, testJob())
			},
			wantCond: berthv1.ConditionEvicted, wantReason: berthv1.ReasonInvalidSpec,
			wantMsg:    "the running job can no longer be queued as it is (pods disagree): it is stopped and queued again once it can be",
			wantEvents: []string{"Stopped Job"}, wantEventMsg: "invalid while running: stopped and queued again once valid"},
		{name: "a deactivated pending workload is held, told on the Workload and its job",
			objs:     []client.Object{testCQ(), testLQ(""), testWL(inactiveWL)},
			wantCond: berthv1.ConditionQuotaReserved, wantReason: berthv1.ReasonDeactivated,
			wantMsg:    "the Workload is deactivated (spec.active is false); it waits until activated: kubectl berth activate workload w -n team-a",
			wantEvents: []string{"Unqueueable Workload", "Unqueueable Job"}},
		{name: "a pending workload without its LocalQueue is held",
			objs:     []client.Object{testCQ(), testWL()},
			wantCond: berthv1.ConditionQuotaReserved, wantReason: berthv1.ReasonLocalQueueNotFound,
			wantMsg:    `LocalQueue "lq" does not exist in namespace "team-a": create it, or set the berth.dev/queue-name label to an existing LocalQueue`,
			wantEvents: []string{"Unqueueable Workload", "Unqueueable Job"}},
		{name: "a pending workload of a held LocalQueue is held",
			objs:     []client.Object{testCQ(), testLQ(berthv1.StopPolicyHold), testWL()},
			wantCond: berthv1.ConditionQuotaReserved, wantReason: berthv1.ReasonLocalQueueStopped,
			wantMsg:    `LocalQueue "lq" is stopped (stopPolicy Hold); its workloads wait until it is resumed: kubectl berth resume localqueue lq -n team-a`,
			wantEvents: []string{"Unqueueable Workload", "Unqueueable Job"}},
		{name: "a pending workload whose namespace the ClusterQueue does not select is held",
			objs:     []client.Object{testCQ(func(cq *berthv1.ClusterQueue) { cq.Spec.NamespaceSelector = nil }), testLQ(""), testWL()},
			wantCond: berthv1.ConditionQuotaReserved, wantReason: berthv1.ReasonNamespaceNotAllowed,
			wantMsg: `ClusterQueue "cq" has no namespaceSelector, which selects no namespace: its administrator sets one that matches namespace "team-a" ` +
				`({} for every namespace), or use another LocalQueue`,
			wantEvents: []string{"Unqueueable Workload", "Unqueueable Job"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runDecisionCase(t, tc)
		})
	}
}

func runDecisionCase(t *testing.T, tc decisionCase) {
	t.Helper()
	objs, report, wantCond, wantReason, wantMsg := tc.objs, tc.report, tc.wantCond, tc.wantReason, tc.wantMsg
	wantEvicted, wantEvents, wantEventMsg := tc.wantEvicted, tc.wantEvents, tc.wantEventMsg
	b, err := fakeapi.Builder(objs...)
	if err != nil {
		t.Fatal(err)
	}
	c := b.WithStatusSubresource(&berthv1.Workload{}).Build()
	rec, m := &fakeapi.Recorder{}, metrics.New()
	s, err := New(c, c, rec, Options{Metrics: m, Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, o := range objs {
		if cq, ok := o.(*berthv1.ClusterQueue); ok {
			if err := s.UpsertClusterQueue(cq, lifecycle.QueueFlavors{}, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	wl := &berthv1.Workload{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, wl); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx, wl); err != nil {
		t.Fatal(err)
	}
	if report != nil {
		report(s)
	}
	s.cycle(ctx)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, wl); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(wl.Status.Conditions, wantCond)
	wantStatus := metav1.ConditionTrue
	if wantCond == berthv1.ConditionQuotaReserved {
		wantStatus = metav1.ConditionFalse
	}
	if cond == nil || cond.Status != wantStatus || cond.Reason != string(wantReason) || cond.Message != wantMsg {
		t.Fatalf("%s = %+v, want %s %s %q", wantCond, cond, wantStatus, wantReason, wantMsg)
	}
	for _, reason := range []string{"Deactivated", "LocalQueueStopped", "ClusterQueueStopped", "Resized", "InvalidSpec"} {
		want := 0.0
		if reason == wantEvicted {
			want = 1
		}
		if got := testutil.ToFloat64(m.Queues.EvictedWorkloadsTotal.WithLabelValues("cq", reason)); got != want {
			t.Errorf("evictions counted for %s = %v, want %v", reason, got, want)
		}
	}
	var events []string
	for _, e := range rec.Events() {
		events = append(events, e.Reason+" "+strings.Fields(e.Regarding)[0])
		if wantEventMsg != "" && e.Note != wantEventMsg {
			t.Errorf("event %s says %q, want %q", e.Reason, e.Note, wantEventMsg)
		}
	}
	if strings.Join(events, ",") != strings.Join(wantEvents, ",") {
		t.Errorf("events %q, want %q", events, wantEvents)
	}
	// Decided once: another cycle writes nothing more.
	s.cycle(ctx)
	if n := len(rec.Events()); n != len(wantEvents) {
		t.Errorf("%d events after another cycle, want %d", n, len(wantEvents))
	}
}

// TestPodsReadyWritten: the engine's decision that every pod of a booked
// gang was Ready in time is written as PodsReady, counting the gang's pods,
// with no event and no eviction; written once, however often it is applied.
func TestPodsReadyWritten(t *testing.T) {
	twoSets := func(wl *berthv1.Workload) {
		wl.Spec.PodSets = append(wl.Spec.PodSets, berthv1.PodSet{Name: "workers", Count: 2,
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
	}
	admitTwo := func(wl *berthv1.Workload) {
		a := &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{
			{Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "f"}},
			{Name: "workers", Count: 2, Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "f"}}}}
		if err := lifecycle.Apply(wl, lifecycle.Admit{Admission: a, Generation: wl.Generation, Message: "admitted by cq"}, metav1.Unix(2, 0)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := fakeapi.Builder(testWL(twoSets, admitTwo))
	if err != nil {
		t.Fatal(err)
	}
	c := b.WithStatusSubresource(&berthv1.Workload{}).Build()
	rec, m := &fakeapi.Recorder{}, metrics.New()
	s, err := New(c, c, rec, Options{Metrics: m, Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	d := admission.BookingDecision{Key: admission.WorkloadKey{Namespace: ns, Name: "w"}, Attempt: 1, Action: admission.BookingPodsReady}
	for range 2 {
		s.applyBooking(t.Context(), d)
	}
	wl := &berthv1.Workload{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "w"}, wl); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionPodsReady)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Message != "all 3 pods were Ready in time" {
		t.Fatalf("PodsReady = %+v, want True, all 3 pods were Ready in time", cond)
	}
	if lifecycle.PhaseOf(wl) != lifecycle.Running {
		t.Errorf("phase %s, want Running", lifecycle.PhaseOf(wl))
	}
	if n := len(rec.Events()); n != 0 {
		t.Errorf("%d events, want none", n)
	}
	if got := testutil.ToFloat64(m.Queues.EvictedWorkloadsTotal.WithLabelValues("cq", "PodsNotReady")); got != 0 {
		t.Errorf("evictions counted = %v, want 0", got)
	}
}
