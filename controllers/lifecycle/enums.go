package lifecycle

import (
	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// enumTable maps the values of one API enum onto the engine's. Each table
// names every value explicitly, so that a test can check that no API value
// lacks one; a value not in the table (an empty field on an object written
// before the API defaulted it) passes through unchanged, as it always did.
type enumTable[A, E ~string] map[A]E

func (t enumTable[A, E]) engine(a A) E {
	if e, ok := t[a]; ok {
		return e
	}
	return E(a)
}

func (t enumTable[A, E]) api(e E) A {
	if a, ok := t.inverse()[e]; ok {
		return a
	}
	return A(e)
}

var (
	queueingStrategies = enumTable[berthv1.QueueingStrategy, admission.QueueingStrategy]{
		berthv1.StrictFIFO:     admission.StrictFIFO,
		berthv1.BestEffortFIFO: admission.BestEffortFIFO,
	}
	preemptionModes = enumTable[berthv1.PreemptionMode, admission.PreemptionMode]{
		berthv1.PreemptNever:                     admission.PreemptNever,
		berthv1.PreemptLowerPriority:             admission.PreemptLowerPriority,
		berthv1.PreemptLowerOrNewerEqualPriority: admission.PreemptLowerOrNewerEqualPriority,
		berthv1.PreemptAny:                       admission.PreemptAny,
	}
	topologyModes = enumTable[berthv1.TopologyMode, admission.TopologyMode]{
		berthv1.TopologyRequired:  admission.TopologyRequired,
		berthv1.TopologyPreferred: admission.TopologyPreferred,
	}
	provisioningModes = enumTable[berthv1.ProvisioningMode, admission.ProvisioningMode]{
		berthv1.ProvisioningNever:    admission.ProvisionNever,
		berthv1.ProvisioningIfNeeded: admission.ProvisionIfNeeded,
		berthv1.ProvisioningAlways:   admission.ProvisionAlways,
	}
	singlePodJobs = enumTable[berthv1.SinglePodJobsPolicy, admission.SinglePodPolicy]{
		berthv1.SinglePodJobsBook:       admission.SinglePodBook,
		berthv1.SinglePodJobsAutoscaler: admission.SinglePodAutoscaler,
	}
	bookingStates = enumTable[berthv1.ProvisioningState, admission.BookingState]{
		berthv1.ProvisioningPending:          admission.BookingPending,
		berthv1.ProvisioningProvisioned:      admission.BookingProvisioned,
		berthv1.ProvisioningFailed:           admission.BookingFailed,
		berthv1.ProvisioningCapacityNotFound: admission.BookingCapacityNotFound,
		berthv1.ProvisioningNoAnswer:         admission.BookingNoAnswer,
		berthv1.ProvisioningBookingExpired:   admission.BookingExpired,
		berthv1.ProvisioningCapacityRevoked:  admission.BookingRevoked,
		berthv1.ProvisioningPodsNotReady:     admission.BookingPodsNotReady,
		berthv1.ProvisioningCancelled:        admission.BookingCancelled,
	}
	// classes maps every provisioning class.
	classes = enumTable[berthv1.ProvisioningClass, admission.ProvisioningClass]{
		berthv1.ProvisioningClassCheckCapacity: admission.ClassCheckCapacity,
		berthv1.ProvisioningClassAtomicScaleUp: admission.ClassAtomicScaleUp,
	}
)

// BookingStateToAPI is the API form of an engine booking state.
func BookingStateToAPI(s admission.BookingState) berthv1.ProvisioningState {
	return bookingStates.api(s)
}

// Stopped reports whether a stop policy holds a queue: the engine knows
// only whether a queue admits, not whether its admitted workloads drain.
func Stopped(p berthv1.StopPolicy) bool {
	return p == berthv1.StopPolicyHold || p == berthv1.StopPolicyHoldAndDrain
}

// ClassToEngine is the engine's provisioning class. A class berth does not
// write (another integration's) books capacity that exists, as the engine
// plans nothing for it.
func ClassToEngine(c berthv1.ProvisioningClass) admission.ProvisioningClass {
	if out, ok := classes[c]; ok {
		return out
	}
	return admission.ClassCheckCapacity
}

// ClassToAPI is the API's provisioning class, the ProvisioningRequest class
// the booking is written with.
func ClassToAPI(c admission.ProvisioningClass) berthv1.ProvisioningClass {
	if a, ok := classes.inverse()[c]; ok {
		return a
	}
	return berthv1.ProvisioningClassCheckCapacity
}

func (t enumTable[A, E]) inverse() map[E]A {
	out := make(map[E]A, len(t))
	for a, e := range t {
		out[e] = a
	}
	return out
}
