package admission

import (
	"cmp"
	"fmt"
	"time"
)

// Defaults of a ProvisioningPolicy's zero fields.
const (
	DefaultMaxAttempts             int32 = 3
	DefaultBookingBackoff                = 10 * time.Second
	DefaultCapacityNotFoundTimeout       = 5 * time.Minute
	DefaultAnswerTimeout                 = 15 * time.Minute
	// maxBookingBackoff caps the doubling backoff.
	maxBookingBackoff = 24 * time.Hour
	// maxFailedDomains is how many failed domains a workload remembers (the API
	// allows 16); the oldest go first.
	maxFailedDomains = 16
)

// ProvisioningPolicy says when a flavor books capacity and how bookings are retried.
// Zero durations and counts take the defaults above.
type ProvisioningPolicy struct {
	// Mode says when to book; "" means ProvisionNever.
	Mode ProvisioningMode
	// SinglePodJobs says whether a workload of one pod with no topology
	// request books (see singlepod.go); "" means SinglePodAutoscaler with
	// ProvisionIfNeeded and SinglePodBook with ProvisionAlways.
	SinglePodJobs SinglePodPolicy
	// MaxAttempts is how many bookings in a row may fail before the engine gives up.
	MaxAttempts int32
	// Backoff is the wait after the first failure; it doubles after each further one.
	Backoff time.Duration
	// CapacityNotFoundTimeout bounds how long a booking may stay answered "no
	// capacity" before it fails in its domain.
	CapacityNotFoundTimeout time.Duration
	// AnswerTimeout bounds how long a created request may stay unanswered.
	AnswerTimeout time.Duration
	// ChecksPodsReady: the controller checks that a started gang's pods all
	// become Ready in time, and reports when they do not. Then only pods
	// Ready in time prove a booking good and reset the failures in a row;
	// a provisioned booking does not, or a gang whose pods never become
	// Ready would be booked again forever at the first backoff. Without
	// the check, a provisioned booking resets them.
	ChecksPodsReady bool
}

func (p ProvisioningPolicy) books() bool {
	return p.Mode == ProvisionIfNeeded || p.Mode == ProvisionAlways
}

func (p ProvisioningPolicy) maxAttempts() int32 { return cmp.Or(p.MaxAttempts, DefaultMaxAttempts) }

// backoff is the wait after the failures-th failure in a row.
func (p ProvisioningPolicy) backoff(failures int32) time.Duration {
	d := cmp.Or(p.Backoff, DefaultBookingBackoff)
	for i := int32(1); i < failures && d < maxBookingBackoff; i++ {
		d *= 2
	}
	return min(d, maxBookingBackoff)
}

func (p ProvisioningPolicy) validate() error {
	if p.MaxAttempts < 0 || p.Backoff < 0 || p.CapacityNotFoundTimeout < 0 || p.AnswerTimeout < 0 {
		return fmt.Errorf("provisioning policy %+v: counts and durations must not be negative", p)
	}
	switch p.Mode {
	case "", ProvisionNever, ProvisionIfNeeded, ProvisionAlways:
		return p.validateSinglePods()
	}
	return fmt.Errorf("provisioning %q must be Never, IfNeeded or Always", p.Mode)
}
