package lifecycle

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// Transition is one allowed change of a Workload's status. Only this
// package defines transitions; Apply and Writer.Write carry them out.
type Transition interface {
	// Name names the transition in errors and logs.
	Name() string
	// from lists the phases the transition may start from.
	from() []Phase
	// apply changes the status; it is called only from an allowed phase
	// and may still refuse (an error) when the object moved on.
	apply(wl *berthv1.Workload, now metav1.Time) error
}

// RefusedError says that a transition does not apply to the workload as
// it is: its phase is not one the transition starts from, or the decision
// it carries was taken for another version of the workload.
type RefusedError struct {
	// Transition is the refused transition's name.
	Transition string
	// Phase is the workload's phase.
	Phase Phase
	// Why says what does not match, when the phase does.
	Why string
}

func (e *RefusedError) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("%s refused in phase %s: %s", e.Transition, e.Phase, e.Why)
	}
	return fmt.Sprintf("%s refused in phase %s", e.Transition, e.Phase)
}

// Apply carries out t on wl at now, or returns a *RefusedError and leaves
// wl unchanged.
func Apply(wl *berthv1.Workload, t Transition, now metav1.Time) error {
	phase := PhaseOf(wl)
	if !slices.Contains(t.from(), phase) {
		return &RefusedError{Transition: t.Name(), Phase: phase}
	}
	work := wl.DeepCopy()
	if err := t.apply(work, now); err != nil {
		return err
	}
	*wl = *work
	return nil
}

func refuse(t Transition, wl *berthv1.Workload, format string, args ...any) error {
	return &RefusedError{Transition: t.Name(), Phase: PhaseOf(wl), Why: fmt.Sprintf(format, args...)}
}

// decidedFor refuses a decision taken for another generation of the spec,
// or for a workload being deleted.
func decidedFor(t Transition, wl *berthv1.Workload, generation int64) error {
	if !wl.DeletionTimestamp.IsZero() {
		return refuse(t, wl, "the workload is being deleted")
	}
	if generation != wl.Generation {
		return refuse(t, wl, "decided for generation %d, the spec is at %d", generation, wl.Generation)
	}
	return nil
}

// Queue records why a pending workload is not admitted.
type Queue struct {
	// Reason is a pending reason.
	Reason berthv1.WorkloadReason
	// Message says what the workload waits for, or what to fix.
	Message string
}

// Name implements Transition.
func (Queue) Name() string  { return "Queue" }
func (Queue) from() []Phase { return []Phase{Pending} }
func (t Queue) apply(wl *berthv1.Workload, now metav1.Time) error {
	derive(wl, why{t.Reason, t.Message}, now)
	return nil
}

// Admit gives a pending workload its admission on existing capacity: it
// may start at once.
type Admit struct {
	// Admission is the quota reserved.
	Admission *berthv1.Admission
	// Generation of the spec the admission was decided for.
	Generation int64
	// Message describes the admission.
	Message string
}

// Name implements Transition.
func (Admit) Name() string  { return "Admit" }
func (Admit) from() []Phase { return []Phase{Pending} }
func (t Admit) apply(wl *berthv1.Workload, now metav1.Time) error {
	if err := decidedFor(t, wl, t.Generation); err != nil {
		return err
	}
	wl.Status.Admission = t.Admission.DeepCopy()
	// An earlier booking no longer describes the gang: its pods must not
	// consume that request, and its failures no longer count.
	wl.Status.Provisioning = nil
	removePodsReady(wl)
	set(wl, berthv1.ConditionQuotaReserved, metav1.ConditionTrue, berthv1.ReasonQuotaReserved, t.Message, now)
	clearEviction(wl, berthv1.ReasonAdmitted, "admitted again after eviction", now)
	derive(wl, why{berthv1.ReasonAdmitted, t.Message}, now)
	return nil
}

// Evict takes an admitted workload's quota back. A started gang is
// stopped first (Evicting: its quota stays counted until Requeue); one
// still waiting for capacity has no pod, so its quota is released at once
// and its booking withdrawn.
type Evict struct {
	// Reason is the Evicted reason.
	Reason berthv1.WorkloadReason
	// Message says why; with Booking, empty takes the booking's message.
	Message string
	// Booking, when the eviction is a failed booking of a started gang,
	// records the failure.
	Booking *BookingFailure
}

// Name implements Transition.
func (Evict) Name() string  { return "Evict" }
func (Evict) from() []Phase { return []Phase{Reserved, Admitted, Running} }
func (t Evict) apply(wl *berthv1.Workload, now metav1.Time) error {
	if PhaseOf(wl) == Reserved {
		if t.Booking != nil {
			return refuse(t, wl, "a booking that fails before its gang started is FailBooking")
		}
		// Waiting for capacity: nothing runs, nothing to stop.
		p := wl.Status.Provisioning
		p.State, p.Message = berthv1.ProvisioningCancelled, truncate("withdrawn: "+t.Message)
		wl.Status.Admission = nil
		set(wl, berthv1.ConditionEvicted, metav1.ConditionTrue, t.Reason, t.Message, now)
		derive(wl, why{berthv1.ReasonPending, t.Message}, now)
		return nil
	}
	msg := t.Message
	if t.Booking != nil {
		if err := t.Booking.record(t, wl); err != nil {
			return err
		}
		if msg == "" {
			msg = wl.Status.Provisioning.Message
		}
	}
	set(wl, berthv1.ConditionEvicted, metav1.ConditionTrue, t.Reason, msg, now)
	if t.Reason == berthv1.ReasonPodsNotReady {
		set(wl, berthv1.ConditionPodsReady, metav1.ConditionFalse, berthv1.ReasonPodsNotReady, msg, now)
	}
	derive(wl, why{berthv1.ReasonEvicted, msg}, now)
	return nil
}

// Requeue releases the quota of an evicted workload whose pods are gone:
// it waits for admission again (or, if its bookings gave up, for someone
// to act).
type Requeue struct {
	// Message says what happened.
	Message string
}

// Name implements Transition.
func (Requeue) Name() string  { return "Requeue" }
func (Requeue) from() []Phase { return []Phase{Evicting} }
func (t Requeue) apply(wl *berthv1.Workload, now metav1.Time) error {
	wl.Status.Admission = nil
	set(wl, berthv1.ConditionEvicted, metav1.ConditionTrue, berthv1.ReasonRequeued, t.Message, now)
	w := why{berthv1.ReasonPending, t.Message}
	if p := wl.Status.Provisioning; p != nil && p.GaveUp {
		w = why{berthv1.ReasonProvisioningGaveUp, p.Message}
	}
	derive(wl, w, now)
	return nil
}

// Shrink lowers the pod counts of an admitted workload whose job runs
// fewer pods now, releasing the quota of the pods it no longer runs. The
// spec's counts are lowered by the caller first.
type Shrink struct {
	// Counts are the new pod counts per pod set; larger counts are ignored.
	Counts map[string]int32
}

// Name implements Transition.
func (Shrink) Name() string  { return "Shrink" }
func (Shrink) from() []Phase { return []Phase{Admitted, Running} }
func (t Shrink) apply(wl *berthv1.Workload, _ metav1.Time) error {
	for i, psa := range wl.Status.Admission.PodSetAssignments {
		if c, ok := t.Counts[psa.Name]; ok && c < psa.Count {
			wl.Status.Admission.PodSetAssignments[i].Count = c
		}
	}
	return nil
}

// HoldPods records the pods that claim the gang and that berth keeps
// gated (condition PodsHeld), or, with none, that it keeps none. It is not
// a change of phase: a tenant who adds members to an admitted pod group
// sees on the Workload, not only in events, that they will not run.
type HoldPods struct {
	// Pods held, each with why; none: the condition is removed.
	Pods []HeldPod
}

// HeldPod is a pod berth keeps gated, and why.
type HeldPod struct {
	Name, Why string
}

// maxHeldNamed caps the pods a PodsHeld message names.
const maxHeldNamed = 10

// Name implements Transition.
func (HoldPods) Name() string { return "HoldPods" }
func (HoldPods) from() []Phase {
	return []Phase{Pending, GaveUp, Reserved, Admitted, Running, Evicting}
}
func (t HoldPods) apply(wl *berthv1.Workload, now metav1.Time) error {
	if len(t.Pods) == 0 {
		meta.RemoveStatusCondition(&wl.Status.Conditions, berthv1.ConditionPodsHeld)
		return nil
	}
	named := t.Pods[:min(len(t.Pods), maxHeldNamed)]
	parts := make([]string, 0, len(named))
	for _, p := range named {
		parts = append(parts, fmt.Sprintf("%s (%s)", p.Name, p.Why))
	}
	msg := fmt.Sprintf("%d pod(s) stay gated: %s", len(t.Pods), strings.Join(parts, "; "))
	if rest := len(t.Pods) - len(named); rest > 0 {
		msg += fmt.Sprintf("; and %d more", rest)
	}
	set(wl, berthv1.ConditionPodsHeld, metav1.ConditionTrue, berthv1.ReasonPodsHeld, msg, now)
	return nil
}

// Finish records that the job ended, which releases its quota.
type Finish struct {
	// Succeeded tells success from failure.
	Succeeded bool
	// Message says how it ended.
	Message string
}

// Name implements Transition.
func (Finish) Name() string { return "Finish" }
func (Finish) from() []Phase {
	return []Phase{Pending, GaveUp, Reserved, Admitted, Running, Evicting}
}
func (t Finish) apply(wl *berthv1.Workload, now metav1.Time) error {
	reason := berthv1.ReasonSucceeded
	if !t.Succeeded {
		reason = berthv1.ReasonFailed
	}
	set(wl, berthv1.ConditionFinished, metav1.ConditionTrue, reason, t.Message, now)
	return nil
}

// Refused reports whether t would be refused on wl as it is.
func Refused(wl *berthv1.Workload, t Transition) error {
	return Apply(wl.DeepCopy(), t, metav1.Time{})
}
