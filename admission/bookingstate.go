package admission

// bookings is the engine's record of capacity bookings (booking.go): which
// admitted workloads are having capacity booked, which wait for booked nodes
// to arrive, the autoscaler's latest answers, and the deadlines they run
// against. It decides what happens to each booking (BookingDecision) and
// keeps the nodes a booking planned on reserved in topology; requeueing a
// workload whose booking failed is the Engine's.
type bookings struct {
	clock     *clock
	workloads map[WorkloadKey]*wl
	topo      *topology
	// queues, order and fair are woken when a backoff ends.
	queues *clusterQueues
	order  *queueOrder
	fair   *fairSharing

	// backoffs are workloads waiting for their next booking attempt.
	backoffs []*wl
	// booking holds the admitted workloads whose capacity is being booked;
	// awaiting those provisioned whose new nodes are still reserved in pools.
	booking  map[*wl]struct{}
	awaiting map[*wl]struct{}
	// pinning holds the workloads of booking whose capacity is provisioned
	// and that wait for their new node to join (provision_host.go).
	pinning map[*wl]struct{}
	// reports are the latest answers about bookings; bookingDirty holds the
	// workloads whose answer or record changed, bookingDue is the next time a
	// bound elapses (0: none).
	reports      map[WorkloadKey]BookingReport
	bookingDirty map[WorkloadKey]struct{}
	bookingDue   int64
	// counts are the latest counts of Ready pods at the pods-ready deadline
	// (AnswerPodsCounted), kept beside the autoscaler's answers so that
	// neither hides the other.
	counts map[WorkloadKey]BookingReport
}

func newBookings(c *clock, workloads map[WorkloadKey]*wl, topo *topology) *bookings {
	return &bookings{clock: c, workloads: workloads, topo: topo, booking: map[*wl]struct{}{}, awaiting: map[*wl]struct{}{}, pinning: map[*wl]struct{}{},
		reports: map[WorkloadKey]BookingReport{}, bookingDirty: map[WorkloadKey]struct{}{}, counts: map[WorkloadKey]BookingReport{}}
}
