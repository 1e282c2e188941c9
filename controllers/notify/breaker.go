package notify

import "time"

// breakers keep one circuit breaker per sink (by policy key). After
// threshold failed attempts in a row a sink's breaker opens: its
// deliveries are dropped without an attempt for cooldown, so a sink that
// hangs or refuses stops taking workers and timeouts from everyone else.
// Once the cool-down has passed one delivery is let through as a trial: if
// it succeeds the breaker closes, if it fails it opens for another
// cool-down.
//
// Not safe for concurrent use: the Dispatcher calls it under its lock.
type breakers struct {
	threshold int
	cooldown  time.Duration
	byKey     map[string]*breaker
}

// breaker is one sink's state.
type breaker struct {
	// sinkType labels the metrics of this sink.
	sinkType string
	// failures counts failed attempts in a row.
	failures int
	// openUntil is when the cool-down ends (zero while closed).
	openUntil time.Time
	// trial is set while the one delivery after a cool-down is in flight.
	trial bool
}

func newBreakers(threshold int, cooldown time.Duration) *breakers {
	return &breakers{threshold: threshold, cooldown: cooldown, byKey: map[string]*breaker{}}
}

// allow reports whether a delivery to the sink may be attempted at now.
func (b *breakers) allow(key string, now time.Time) bool {
	br := b.byKey[key]
	switch {
	case br == nil || br.openUntil.IsZero():
		return true
	case now.Before(br.openUntil) || br.trial:
		return false
	}
	br.trial = true
	return true
}

// record counts the result of an attempt to the sink, and reports whether
// it opened the breaker (from closed) or closed it.
func (b *breakers) record(key, sinkType string, ok bool, now time.Time) (opened, closed bool) {
	br := b.byKey[key]
	if ok {
		if br == nil {
			return false, false
		}
		delete(b.byKey, key)
		return false, !br.openUntil.IsZero()
	}
	if br == nil {
		br = &breaker{sinkType: sinkType}
		b.byKey[key] = br
	}
	br.failures++
	switch {
	case br.trial:
		br.trial, br.openUntil = false, now.Add(b.cooldown)
	case br.openUntil.IsZero() && br.failures >= b.threshold:
		br.openUntil = now.Add(b.cooldown)
		return true, false
	}
	return false, false
}

// forget drops a sink's state (its policy went away), and reports the
// sink's type when its breaker was open.
func (b *breakers) forget(key string) (sinkType string, wasOpen bool) {
	br := b.byKey[key]
	delete(b.byKey, key)
	if br == nil || br.openUntil.IsZero() {
		return "", false
	}
	return br.sinkType, true
}
