package lifecycle

// Reasons of the events berth records on Workloads (and, for the
// actionable ones, on their jobs). The conditions say where a workload
// stands; events say what happened to it, once.
const (
	// EventInadmissible: the workload cannot be admitted until someone
	// changes it or its queue (the message says what).
	EventInadmissible = "Inadmissible"
	// EventUnqueueable: the workload cannot be queued at all (missing
	// LocalQueue, namespace not accepted).
	EventUnqueueable = "Unqueueable"
	// EventDeactivated: an admitted workload was deactivated and is evicted.
	EventDeactivated = "Deactivated"
	// EventRequestCreated: a ProvisioningRequest books the gang's capacity.
	EventRequestCreated = "ProvisioningRequestCreated"
	// EventRequestSquatted: a ProvisioningRequest, or a PodTemplate it
	// would name, of the name berth needs exists and is not berth's; the
	// attempt fails and the next one uses another name.
	EventRequestSquatted = "ProvisioningRequestNotOwned"
	// EventProvisioned: the booked capacity is provisioned; the gang starts.
	EventProvisioned = "CapacityProvisioned"
	// EventProvisioningFailed: a booking failed; the next attempt waits for
	// its backoff.
	EventProvisioningFailed = "ProvisioningFailed"
	// EventProvisioningGaveUp: maxAttempts bookings failed in a row.
	EventProvisioningGaveUp = "ProvisioningGaveUp"
	// EventCapacityRevoked, EventBookingExpired, EventPodsNotReady: a
	// started gang lost its booking, or its pods were not Ready in time,
	// and is evicted.
	EventCapacityRevoked = "CapacityRevoked"
	EventBookingExpired  = "BookingExpired"
	EventPodsNotReady    = "PodsNotReady"
	// EventResized: the job's size or placement changed under its
	// admission (recorded on the job).
	EventResized = "Resized"
	// EventStopped: the job was stopped (recorded on the job).
	EventStopped = "Stopped"
)
