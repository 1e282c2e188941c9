package provisioning

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/internal/fakeapi"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

// now is the fake clock's time in every case.
func now() time.Time { return time.Unix(10_000, 0) }

// reports records what the reconciler told the engine.
type reports []admission.BookingReport

func (r *reports) ReportBooking(_ admission.WorkloadKey, rep admission.BookingReport) {
	*r = append(*r, rep)
}

// availability is a fixed answer to whether the API is served.
type availability bool

func (a availability) Available() bool { return bool(a) }

// booking is bookingWorkload as stored: with a UID, its flavor named, and
// Reserved (its admission books capacity and the booking is pending).
func booking(topology *berthv1.TopologyAssignment, opts ...func(*berthv1.Workload)) *berthv1.Workload {
	wl := bookingWorkload(topology)
	wl.UID = "wl-uid"
	wl.Status.Provisioning.Flavor = "h200"
	for _, o := range opts {
		o(wl)
	}
	return wl
}

func rack() *berthv1.TopologyAssignment {
	return &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack"}, Values: []string{"z1", "r2"}}
}

// oneNewNode is a hostname domain of rack r2 whose node is still to be
// created.
func oneNewNode() *berthv1.TopologyAssignment {
	return &berthv1.TopologyAssignment{Flavor: "h200", Levels: []string{"zone", "rack", "kubernetes.io/hostname"}, Values: []string{"z1", "r2", ""}}
}

// onePool books one new node of pool big-r2.
func onePool(wl *berthv1.Workload) {
	wl.Status.Admission.Provisioning.NewNodes = []berthv1.PoolNodes{{Pool: "big-r2", Nodes: 1}}
}

// withMessage records msg as the booking's message, as NoteBooking does
// (with its note for bookings that name no domain).
func withMessage(msg string) func(*berthv1.Workload) {
	return func(wl *berthv1.Workload) {
		t := lifecycle.NoteBooking{Attempt: wl.Status.Provisioning.Attempt, Message: msg}
		if err := lifecycle.Apply(wl, t, metav1.Unix(1, 0)); err != nil {
			panic(err)
		}
	}
}

// started makes the booking provisioned and the gang admitted at
// admittedAt, with podsReadySeconds on its flavor checked by the caller.
func started(admittedAt time.Time) func(*berthv1.Workload) {
	return func(wl *berthv1.Workload) {
		wl.Status.Provisioning.State = berthv1.ProvisioningProvisioned
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: berthv1.ConditionAdmitted,
			Status: metav1.ConditionTrue, Reason: string(berthv1.ReasonAdmitted), LastTransitionTime: metav1.NewTime(admittedAt)})
	}
}

func deletingWL(wl *berthv1.Workload) {
	wl.DeletionTimestamp = ptr.To(metav1.Unix(1, 0))
	wl.Finalizers = []string{berthv1.WorkloadFinalizer}
}

func finishedWL(wl *berthv1.Workload) {
	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: berthv1.ConditionFinished,
		Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.Unix(1, 0)})
}

func noBooking(wl *berthv1.Workload) { wl.Status.Provisioning = nil }

// gaveUp is a workload whose booking failed and which holds no quota.
func gaveUp(wl *berthv1.Workload) {
	wl.Status.Admission = nil
	wl.Status.Provisioning.State = berthv1.ProvisioningFailed
}

// flavor is h200 with podsReadySeconds set.
func flavor(podsReadySeconds int32) *berthv1.ResourceFlavor {
	rf := h200()
	rf.Spec.Provisioning.PodsReadySeconds = podsReadySeconds
	return rf
}

// request is a ProvisioningRequest of the workload's attempt, controlled by
// owner (nil: by nobody), with the given conditions.
func request(name string, owner *berthv1.Workload, conds ...metav1.Condition) *autoscalingv1.ProvisioningRequest {
	pr := &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec: autoscalingv1.ProvisioningRequestSpec{PodSets: []autoscalingv1.PodSet{
			{PodTemplateRef: autoscalingv1.Reference{Name: TemplateName(name, "leader")}, Count: 1},
		}},
		Status: autoscalingv1.ProvisioningRequestStatus{Conditions: conds},
	}
	if owner != nil {
		pr.OwnerReferences = []metav1.OwnerReference{{APIVersion: berthv1.GroupVersion.String(), Kind: "Workload",
			Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	}
	return pr
}

func prCond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Unix(5, 0)}
}

// gangPod is a pod of the workload that consumes request, Ready or not,
// bound to node (empty: not bound).
func gangPod(name, request, node string, ready bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: map[string]string{berthv1.WorkloadLabel: "wl-uid"},
			Annotations: map[string]string{autoscalingv1.ProvisioningRequestPodAnnotationKey: request}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

// wlCase is one call of the Workload reconciler.
type wlCase struct {
	name        string
	objs        []client.Object
	unavailable bool
	fail        []fakeapi.Failure

	wantResult  reconcile.Result
	wantErr     string
	wantAnswers []admission.Answer
	wantEvents  []string
	check       func(t *testing.T, c client.Client, reps reports)
}

func runWorkloadCase(t *testing.T, tc wlCase) {
	t.Helper()
	b, err := fakeapi.Builder(tc.objs...)
	if err != nil {
		t.Fatal(err)
	}
	base := b.Build()
	c := fakeapi.Failing(base, tc.fail...)
	rec := &fakeapi.Recorder{}
	reps := &reports{}
	r := NewReconciler(c, c, rec, clocktesting.NewFakePassiveClock(now()), availability(!tc.unavailable), reps)
	res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "job-train-abcde"}})
	switch {
	case tc.wantErr == "" && err != nil:
		t.Fatalf("Reconcile: unexpected error %v", err)
	case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
		t.Fatalf("Reconcile error = %v, want one containing %q", err, tc.wantErr)
	}
	if res != tc.wantResult {
		t.Errorf("result = %+v, want %+v", res, tc.wantResult)
	}
	var answers []admission.Answer
	for _, rep := range *reps {
		answers = append(answers, rep.Answer)
		if rep.Attempt != 2 {
			t.Errorf("report for attempt %d, want the booking's attempt 2", rep.Attempt)
		}
	}
	if !equalStrings(answers, tc.wantAnswers) {
		t.Errorf("answers reported = %v, want %v", answers, tc.wantAnswers)
	}
	if got := rec.Reasons(); !equalStrings(got, tc.wantEvents) {
		t.Errorf("events = %v, want %v", got, tc.wantEvents)
	}
	if tc.check != nil {
		tc.check(t, base, *reps)
	}
}

func equalStrings[S comparable](a, b []S) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stored reads the workload back.
func stored(t *testing.T, c client.Client) *berthv1.Workload {
	t.Helper()
	wl := &berthv1.Workload{}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: "team-a", Name: "job-train-abcde"}, wl); err != nil {
		t.Fatalf("reading the workload back: %v", err)
	}
	return wl
}

// exists reports whether obj's kind holds an object of that name.
func exists(t *testing.T, c client.Client, obj client.Object, name string) bool {
	t.Helper()
	err := c.Get(t.Context(), types.NamespacedName{Namespace: "team-a", Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("reading %s: %v", name, err)
	}
	return err == nil
}

// messageHas checks the booking's stored message.
func messageHas(prefix string, not ...string) func(*testing.T, client.Client, reports) {
	return func(t *testing.T, c client.Client, _ reports) {
		t.Helper()
		msg := stored(t, c).Status.Provisioning.Message
		if !strings.HasPrefix(msg, prefix) {
			t.Errorf("booking message = %q, want it to start with %q", msg, prefix)
		}
		for _, n := range not {
			if strings.Contains(msg, n) {
				t.Errorf("booking message = %q, want no %q", msg, n)
			}
		}
	}
}

// nothingCreated checks that no request and no template of attempt 2
// exist.
func nothingCreated(t *testing.T, c client.Client, _ reports) {
	t.Helper()
	if exists(t, c, &autoscalingv1.ProvisioningRequest{}, "job-train-abcde-2") {
		t.Error("a ProvisioningRequest was created")
	}
	if exists(t, c, &corev1.PodTemplate{}, TemplateName("job-train-abcde-2", "leader")) {
		t.Error("a PodTemplate was created")
	}
}

// alreadyExists is the API server's answer to creating attempt 2's
// request again.
func alreadyExists() error {
	return apierrors.NewAlreadyExists(schema.GroupResource{Group: autoscalingv1.SchemeGroupVersion.Group, Resource: "provisioningrequests"},
		"job-train-abcde-2")
}
