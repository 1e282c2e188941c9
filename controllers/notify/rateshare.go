package notify

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"

	"golang.org/x/time/rate"
)

// maxBurst bounds how many reports a policy sends at once, however high
// its rate.
const maxBurst = 10

// rateShare is a policy's rate, shared among the namespaces the policy
// selects.
//
// The rate stays the cap on what the policy's sink receives: for a
// ClusterNotificationPolicy it is the platform's protection of its
// channel, so it does not grow with the namespaces selected. What is
// shared is who gets each report the rate lets out. Were reports let out
// as they come due, and dropped when the rate refuses, the first to come
// due would take the whole rate: one namespace running a dozen
// crash-looping jobs would have every other namespace's reports dropped.
// Instead a due report waits in a queue of its namespace, and each time
// the rate allows one more report, the namespace with reports waiting that
// sent least recently sends its oldest. A namespace that floods therefore
// comes after one that was quiet, whose report goes out with the next
// report the rate allows (after other quiet namespaces', if any wait);
// and as each namespace's queue is bounded, what overflows is the flooding
// namespace's own excess. A NotificationPolicy selects one namespace,
// which has the whole rate.
//
// It is a plain data structure, not safe for concurrent use: the notifier
// calls it under policyMu.
type rateShare struct {
	limiter *rate.Limiter
	// limit bounds each namespace's waiting reports. It is the burst: a
	// namespace keeps waiting no more than the rate sends at once, so what
	// waits goes out within that many of the namespace's turns, and a
	// spike that comes due while the rate is unused fares as it would with
	// no queue: the burst goes out, the rest is dropped.
	limit int
	byNS  map[string]*nsTurn
	// seq orders sends and first waits.
	seq uint64
}

// nsTurn is one namespace's place in a rateShare.
type nsTurn struct {
	waiting []*Report
	// served is the seq of the namespace's last send; 0 when it has not
	// sent since it was last forgotten.
	served uint64
	// since is the seq at which the namespace began to wait: among those
	// not served, the one waiting longest goes first.
	since uint64
}

// compare orders namespaces by turn: the one that sent least recently
// first, and of those that have not sent, the one waiting longest.
func (q *nsTurn) compare(o *nsTurn) int {
	return cmp.Or(cmp.Compare(q.served, o.served), cmp.Compare(q.since, o.since))
}

// perHour is the limiter's rate for maxReportsPerHour.
func perHour(maxReportsPerHour int32) rate.Limit {
	return rate.Limit(float64(maxReportsPerHour) / 3600)
}

// newRateShare shares maxReportsPerHour, with a burst of at most maxBurst.
func newRateShare(maxReportsPerHour int32) *rateShare {
	burst := max(int(min(maxReportsPerHour, maxBurst)), 1)
	return &rateShare{limiter: rate.NewLimiter(perHour(maxReportsPerHour), burst), limit: burst, byNS: map[string]*nsTurn{}}
}

// offer queues a due report behind its namespace's; false, and the report
// is not kept, when that namespace's queue is full.
func (s *rateShare) offer(r *Report) bool {
	q := s.byNS[r.Gang.Namespace]
	if q == nil {
		q = &nsTurn{}
		s.byNS[r.Gang.Namespace] = q
	}
	if len(q.waiting) >= s.limit {
		return false
	}
	if len(q.waiting) == 0 {
		s.seq++
		q.since = s.seq
	}
	q.waiting = append(q.waiting, r)
	return true
}

// release takes out, in turn, the waiting reports the rate lets out at
// now.
func (s *rateShare) release(now time.Time) []*Report {
	var out []*Report
	for {
		q := s.next()
		if q == nil || !s.limiter.AllowN(now, 1) {
			break
		}
		out = append(out, q.waiting[0])
		q.waiting[0] = nil // let the report be collected
		q.waiting = q.waiting[1:]
		s.seq++
		q.served = s.seq
	}
	s.prune(now)
	return out
}

// next is the namespace with reports waiting whose turn it is; nil when
// none waits.
func (s *rateShare) next() *nsTurn {
	var best *nsTurn
	for _, q := range s.byNS {
		if len(q.waiting) == 0 {
			continue
		}
		if best == nil || q.compare(best) < 0 {
			best = q
		}
	}
	return best
}

// prune forgets the namespaces with nothing waiting whose place no longer
// matters, so that what is kept is bounded by the namespaces contending
// for the rate: one that sent before every namespace that waits (forgotten,
// it counts as not having sent, which puts it where it stood anyway: ahead
// of those), and, when none waits, every one once the rate is back to its
// whole burst (every namespace may then send a burst at once, and turns
// start afresh when the rate is next contended).
func (s *rateShare) prune(now time.Time) {
	oldest := uint64(math.MaxUint64)
	for _, q := range s.byNS {
		if len(q.waiting) > 0 {
			oldest = min(oldest, q.served)
		}
	}
	if oldest == math.MaxUint64 && s.limiter.TokensAt(now) < float64(s.limiter.Burst()) {
		oldest = 0 // none waits, but the rate was used lately: keep the turns
	}
	for ns, q := range s.byNS {
		if len(q.waiting) == 0 && q.served < oldest {
			delete(s.byNS, ns)
		}
	}
}

// drain removes and returns every waiting report, namespace by namespace
// in the order of their turns, so that offered to another rateShare they
// keep their order.
func (s *rateShare) drain() []*Report {
	queues := slices.Collect(maps.Values(s.byNS))
	slices.SortFunc(queues, (*nsTurn).compare)
	var out []*Report
	for _, q := range queues {
		out = append(out, q.waiting...)
	}
	s.byNS = map[string]*nsTurn{}
	return out
}

// waiting counts the reports waiting.
func (s *rateShare) waiting() int {
	n := 0
	for _, q := range s.byNS {
		n += len(q.waiting)
	}
	return n
}
