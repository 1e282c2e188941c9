package notify

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// bucketKey is one gang and one kind of failure.
type bucketKey struct {
	gang types.UID
	kind Kind
}

// bucket collects the failures of one gang and kind until its report is
// due.
type bucket struct {
	report *Report
	// due is when the collected failures are reported.
	due time.Time
	// lastSent is when the last report of this key went out; a new report
	// is not due before lastSent + window.
	lastSent time.Time
}

// Aggregator folds failures into reports: at most one report per gang and
// kind per window. The first failure of a key opens a bucket that is
// reported once the window has passed since the previous report of that
// key (at once, after a short settle, when there was none), carrying every
// failure of the key that arrived meanwhile — "3 of 8 pods restarted"
// rather than three messages. It is not safe for concurrent use; the
// notifier calls it from one goroutine.
type Aggregator struct {
	// Window is the dedup window; Settle is how long a first failure waits
	// for its siblings (a gang's pods usually fail together).
	Window, Settle time.Duration
	// MaxFailures bounds the failures kept per report; more are counted in
	// Suppressed.
	MaxFailures int

	buckets map[bucketKey]*bucket
}

// NewAggregator returns an Aggregator with the window and settle time.
func NewAggregator(window, settle time.Duration) *Aggregator {
	return &Aggregator{Window: window, Settle: settle, MaxFailures: 64, buckets: map[bucketKey]*bucket{}}
}

// Add records a failure of the gang at now.
func (a *Aggregator) Add(g Gang, f Failure, now time.Time) {
	k := bucketKey{gang: g.UID, kind: f.Kind}
	b := a.buckets[k]
	if b == nil {
		b = &bucket{}
		a.buckets[k] = b
	}
	if b.report == nil {
		b.report = &Report{Gang: g, Kind: f.Kind}
		b.due = now.Add(a.Settle)
		if next := b.lastSent.Add(a.Window); !b.lastSent.IsZero() && next.After(b.due) {
			b.due = next
		}
	}
	b.report.Gang = g // the latest view of the gang
	for _, have := range b.report.Failures {
		if have.Pod == f.Pod && have.Container == f.Container {
			b.report.Suppressed++
			return
		}
	}
	if len(b.report.Failures) >= a.MaxFailures {
		b.report.Suppressed++
		return
	}
	b.report.Failures = append(b.report.Failures, f)
}

// Due returns the reports due at now, oldest first, and forgets the keys
// that have been quiet for a whole window.
func (a *Aggregator) Due(now time.Time) []*Report {
	var out []*Report
	for k, b := range a.buckets {
		switch {
		case b.report != nil && !now.Before(b.due):
			out = append(out, b.report)
			b.report, b.lastSent = nil, now
		case b.report == nil && now.Sub(b.lastSent) >= a.Window:
			delete(a.buckets, k)
		}
	}
	slices.SortFunc(out, func(x, y *Report) int {
		return cmp.Or(x.Failures[0].At.Compare(y.Failures[0].At), cmp.Compare(x.Gang.UID, y.Gang.UID), cmp.Compare(x.Kind, y.Kind))
	})
	return out
}

// Next is when the next report is due (zero when none is pending), for the
// notifier's timer.
func (a *Aggregator) Next() time.Time {
	var next time.Time
	for _, b := range a.buckets {
		if b.report != nil && (next.IsZero() || b.due.Before(next)) {
			next = b.due
		}
	}
	return next
}

// Forget drops what is collected for a gang that went away.
func (a *Aggregator) Forget(gang types.UID) {
	for k := range a.buckets {
		if k.gang == gang {
			delete(a.buckets, k)
		}
	}
}
