package v1alpha1

// The functions below list every value of each enum the admission engine
// reads, in declaration order. They are the API side of the conversions in
// controllers/lifecycle: a test there checks that each list matches the
// constants declared here and that every value converts to the engine and
// back, so adding a value here without a conversion fails that test.

// QueueingStrategies lists every QueueingStrategy.
func QueueingStrategies() []QueueingStrategy {
	return []QueueingStrategy{StrictFIFO, BestEffortFIFO}
}

// PreemptionModes lists every PreemptionMode.
func PreemptionModes() []PreemptionMode {
	return []PreemptionMode{PreemptNever, PreemptLowerPriority, PreemptLowerOrNewerEqualPriority, PreemptAny}
}

// StopPolicies lists every StopPolicy.
func StopPolicies() []StopPolicy {
	return []StopPolicy{StopPolicyNone, StopPolicyHold, StopPolicyHoldAndDrain}
}

// TopologyModes lists every TopologyMode.
func TopologyModes() []TopologyMode {
	return []TopologyMode{TopologyRequired, TopologyPreferred}
}

// ProvisioningModes lists every ProvisioningMode.
func ProvisioningModes() []ProvisioningMode {
	return []ProvisioningMode{ProvisioningNever, ProvisioningIfNeeded, ProvisioningAlways}
}

// SinglePodJobsPolicies lists every SinglePodJobsPolicy.
func SinglePodJobsPolicies() []SinglePodJobsPolicy {
	return []SinglePodJobsPolicy{SinglePodJobsBook, SinglePodJobsAutoscaler}
}

// ProvisioningStates lists every ProvisioningState.
func ProvisioningStates() []ProvisioningState {
	return []ProvisioningState{ProvisioningPending, ProvisioningProvisioned, ProvisioningFailed, ProvisioningCapacityNotFound,
		ProvisioningNoAnswer, ProvisioningBookingExpired, ProvisioningCapacityRevoked, ProvisioningPodsNotReady, ProvisioningCancelled}
}

// ProvisioningClasses lists every ProvisioningClass.
func ProvisioningClasses() []ProvisioningClass {
	return []ProvisioningClass{ProvisioningClassCheckCapacity, ProvisioningClassAtomicScaleUp}
}
