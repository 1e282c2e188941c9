package workload

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/controllers/scheduler"
)

const (
	ns     = "team-a"
	wlName = "train"
	wlUID  = types.UID("wl-uid")
)

// fakeEngine stands in for the scheduler: it answers SyncWorkload as told
// and records what it was asked.
type fakeEngine struct {
	unq     *scheduler.Unqueueable
	err     error
	synced  []string
	deleted []admission.WorkloadKey
}

func (e *fakeEngine) SyncWorkload(_ context.Context, wl *berthv1.Workload) (*scheduler.Unqueueable, error) {
	e.synced = append(e.synced, wl.Namespace+"/"+wl.Name)
	return e.unq, e.err
}

func (e *fakeEngine) DeleteWorkload(key admission.WorkloadKey) { e.deleted = append(e.deleted, key) }

// workload is a Workload berth created for a Job: owned, with the
// finalizer, queued in LocalQueue "lq"; opts change it.
func workload(opts ...func(*berthv1.Workload)) *berthv1.Workload {
	wl := &berthv1.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: wlName, UID: wlUID, Generation: 1,
			Finalizers: []string{berthv1.WorkloadFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train-job",
				UID: "job-uid", Controller: ptr.To(true)}},
		},
		Spec: berthv1.WorkloadSpec{QueueName: "lq"},
	}
	for _, o := range opts {
		o(wl)
	}
	return wl
}

func admitted(wl *berthv1.Workload) {
	wl.Status.Admission = &berthv1.Admission{ClusterQueue: "cq", PodSetAssignments: []berthv1.PodSetAssignment{{Name: "main"}}}
}

func evicting(wl *berthv1.Workload) {
	admitted(wl)
	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: berthv1.ConditionEvicted,
		Status: metav1.ConditionTrue, Reason: string(berthv1.ReasonPreempted), LastTransitionTime: metav1.Unix(1, 0)})
}

func finished(wl *berthv1.Workload) {
	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: berthv1.ConditionFinished,
		Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.Unix(1, 0)})
}

func inactive(wl *berthv1.Workload) { wl.Spec.Active = ptr.To(false) }

func deleting(wl *berthv1.Workload) { wl.DeletionTimestamp = ptr.To(metav1.Unix(100, 0)) }

func orphaned(wl *berthv1.Workload) { wl.OwnerReferences = nil }

func noFinalizer(wl *berthv1.Workload) { wl.Finalizers = nil }

func notControlled(wl *berthv1.Workload) { wl.OwnerReferences[0].Controller = nil }

// queued is a workload whose QuotaReserved already says why it cannot be
// queued, with the reason and message the engine gives again.
func queued(reason berthv1.WorkloadReason, msg string) func(*berthv1.Workload) {
	return func(wl *berthv1.Workload) {
		if err := lifecycle.Apply(wl, lifecycle.Queue{Reason: reason, Message: msg}, metav1.Unix(1, 0)); err != nil {
			panic(err)
		}
	}
}

// pod is a pod berth started for the workload with uid.
func pod(name string, uid types.UID, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{berthv1.WorkloadLabel: string(uid)}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// refused is the scheduler's answer for a workload whose spec the engine
// refused. (Whether a workload may be queued at all is the engine's
// decision, which the scheduler writes: the reconciler only feeds it.)
func refused() *scheduler.Unqueueable {
	return &scheduler.Unqueueable{Reason: berthv1.ReasonInvalidSpec, Message: "pod set main asks for no resources"}
}

// reconcileCase is one call of Reconcile: the objects in the API, what the
// engine answers, which calls fail, and what must come out.
type reconcileCase struct {
	name      string
	objs      []client.Object
	unq       *scheduler.Unqueueable
	engineErr error
	fail      []fakeapi.Failure

	wantResult  reconcile.Result
	wantErr     string // a substring of the error; empty: no error
	wantSynced  int
	wantDeleted bool
	wantEvents  []string // "Reason Kind" in order
	// check looks at the API afterwards.
	check func(t *testing.T, c client.Client)
}

func TestReconcile(t *testing.T) {
	engineErr := errors.New("engine refused")
	for _, tc := range append(append(queueCases(engineErr), deactivateCases()...), releaseCases(engineErr)...) {
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc) })
	}
}

func runCase(t *testing.T, tc reconcileCase) {
	t.Helper()
	b, err := fakeapi.Builder(tc.objs...)
	if err != nil {
		t.Fatal(err)
	}
	base := b.Build()
	c := fakeapi.Failing(base, tc.fail...)
	eng := &fakeEngine{unq: tc.unq, err: tc.engineErr}
	rec := &fakeapi.Recorder{}
	r := NewReconciler(c, c, eng, rec, clocktesting.NewFakePassiveClock(time.Unix(1000, 0)))

	res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: wlName}})
	switch {
	case tc.wantErr == "" && err != nil:
		t.Fatalf("Reconcile: unexpected error %v", err)
	case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
		t.Fatalf("Reconcile error = %v, want one containing %q", err, tc.wantErr)
	}
	if res != tc.wantResult {
		t.Errorf("Reconcile result = %+v, want %+v", res, tc.wantResult)
	}
	if len(eng.synced) != tc.wantSynced {
		t.Errorf("engine synced %d times, want %d", len(eng.synced), tc.wantSynced)
	}
	wantDeleted := []admission.WorkloadKey(nil)
	if tc.wantDeleted {
		wantDeleted = []admission.WorkloadKey{{Namespace: ns, Name: wlName}}
	}
	if !slices.Equal(eng.deleted, wantDeleted) {
		t.Errorf("engine deleted %v, want %v", eng.deleted, wantDeleted)
	}
	var events []string
	for _, e := range rec.Events() {
		events = append(events, e.Reason+" "+strings.Fields(e.Regarding)[0])
	}
	if !slices.Equal(events, tc.wantEvents) {
		t.Errorf("events = %q, want %q", events, tc.wantEvents)
	}
	if tc.check != nil {
		tc.check(t, base)
	}
}

// get reads the workload back; nil when it is gone.
func get(t *testing.T, c client.Client) *berthv1.Workload {
	t.Helper()
	wl := &berthv1.Workload{}
	err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: wlName}, wl)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading the workload back: %v", err)
	}
	return wl
}

// wantCondition checks one condition of the stored workload.
func wantCondition(typ string, status metav1.ConditionStatus, reason berthv1.WorkloadReason, msg string) func(*testing.T, client.Client) {
	return func(t *testing.T, c client.Client) {
		t.Helper()
		wl := get(t, c)
		if wl == nil {
			t.Fatal("the workload is gone")
		}
		cond := lifecycle.Condition(wl, typ)
		if cond == nil {
			t.Fatalf("no %s condition; conditions: %+v", typ, wl.Status.Conditions)
		}
		if cond.Status != status || cond.Reason != string(reason) || (msg != "" && cond.Message != msg) {
			t.Errorf("%s = %s/%s %q, want %s/%s %q", typ, cond.Status, cond.Reason, cond.Message, status, reason, msg)
		}
	}
}

// unchanged checks that the stored workload has no conditions and still
// has its finalizer: nothing was written.
func unchanged(t *testing.T, c client.Client) {
	t.Helper()
	wl := get(t, c)
	if wl == nil {
		t.Fatal("the workload is gone")
	}
	if len(wl.Status.Conditions) != 0 {
		t.Errorf("conditions written: %+v", wl.Status.Conditions)
	}
	if len(wl.Finalizers) != 1 {
		t.Errorf("finalizers = %v, want the workload finalizer", wl.Finalizers)
	}
}

// kept checks that the workload is still there with its finalizer.
func kept(t *testing.T, c client.Client) {
	t.Helper()
	wl := get(t, c)
	if wl == nil {
		t.Fatal("the workload is gone, want it kept")
	}
	if !slices.Contains(wl.Finalizers, berthv1.WorkloadFinalizer) {
		t.Errorf("finalizers = %v, want the workload finalizer kept", wl.Finalizers)
	}
}

// removed checks that the workload is gone from the API.
func removed(t *testing.T, c client.Client) {
	t.Helper()
	if wl := get(t, c); wl != nil {
		t.Errorf("the workload is still there (finalizers %v), want it gone", wl.Finalizers)
	}
}

// conflict is the API server's answer to a write from a stale copy.
func conflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: berthv1.GroupVersion.Group, Resource: "workloads"}, wlName, errors.New("changed"))
}

// notFound is the API server's answer for an object that is gone.
func notFound() error {
	return apierrors.NewNotFound(schema.GroupResource{Group: berthv1.GroupVersion.Group, Resource: "workloads"}, wlName)
}
