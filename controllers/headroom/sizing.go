// Package headroom sizes warm capacity for serving replicas: how many
// replicas' worth of nodes to keep ready ahead of demand, so that a replica
// added in a burst starts on a node that is already there instead of
// waiting minutes for one to boot.
//
// A size is a number of replicas, from one of three rules — a fixed count,
// a percentage of the replicas running now, or the demand seen recently
// (how many replicas were added within one node-provisioning latency) —
// bounded by a minimum and a maximum, and by what the queue's quota could
// still admit: headroom that no admissible replica could use is not kept.
package headroom

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Mode is the rule that sizes headroom.
type Mode string

const (
	// Fixed keeps Policy.Replicas replicas' worth.
	Fixed Mode = "Fixed"
	// Percent keeps Policy.Percent percent of the current replicas,
	// rounded up.
	Percent Mode = "Percent"
	// Demand keeps what recent scale-ups needed: see Demand.
	Demand Mode = "Demand"
)

// Policy is how much headroom to keep, in replicas.
type Policy struct {
	// Mode picks the rule.
	Mode Mode
	// Replicas is the Fixed size.
	Replicas int32
	// Percent is the Percent rule's share of the current replicas.
	Percent int32
	// Demand parameterises the Demand rule.
	Demand DemandRule
	// Min and Max bound the size the rule gives; Max 0 is no bound.
	Min, Max int32
}

// DemandRule sizes headroom from the scale-ups seen within Window: at each
// moment the replica count rose, the replicas added since one Latency
// before (the rise over the trailing provisioning latency) is a sample;
// the size is the Percentile-th of the samples. A replica added later than
// a node takes to boot finds the headroom that the first replicas of its
// burst took restored, so only the replicas added within one latency need
// headroom at once.
//
// With a Period (a day, for traffic that bursts at the same hours), only
// the scale-ups of the same time in earlier periods count — from one
// Latency before this moment to Lead after it, Lead periods ago included —
// and those of the last Latency, the burst under way: headroom is kept
// ahead of the hours that burst, and not through the quiet ones.
type DemandRule struct {
	// Window is how far back scale-ups count.
	Window time.Duration
	// Period, when set, counts only the scale-ups of the same time of
	// earlier periods, and of the last Latency.
	Period time.Duration
	// Lead is how far ahead of the same time of earlier periods their
	// scale-ups count already, with a Period: at least a node's
	// provisioning latency, for the headroom to be ready when they recur.
	Lead time.Duration
	// Latency is how long a new node takes to become allocatable.
	Latency time.Duration
	// Percentile of the samples, 1-100 (nearest rank).
	Percentile int32
}

// Validate says what is wrong with p, if anything, in terms of its fields.
func (p Policy) Validate() error {
	switch p.Mode {
	case Fixed:
		if p.Replicas < 0 {
			return fmt.Errorf("replicas must not be negative, got %d", p.Replicas)
		}
	case Percent:
		if p.Percent < 0 || p.Percent > 1000 {
			return fmt.Errorf("percent must be within 0-1000, got %d", p.Percent)
		}
	case Demand:
		d := p.Demand
		if d.Window <= 0 || d.Latency <= 0 || d.Latency > d.Window {
			return fmt.Errorf("demand needs a positive window and latency, the latency no longer than the window; got window %s, latency %s", d.Window, d.Latency)
		}
		if d.Percentile < 1 || d.Percentile > 100 {
			return fmt.Errorf("demand percentile must be within 1-100, got %d", d.Percentile)
		}
		if d.Period < 0 || d.Lead < 0 || (d.Period > 0 && d.Period+d.Lead > d.Window) {
			return fmt.Errorf("demand period and lead must not be negative, and a period plus its lead must fit in the window; got period %s, lead %s, window %s", d.Period, d.Lead, d.Window)
		}
	default:
		return fmt.Errorf("mode must be one of %s, %s, %s; got %q", Fixed, Percent, Demand, p.Mode)
	}
	if p.Min < 0 || p.Max < 0 || (p.Max > 0 && p.Min > p.Max) {
		return fmt.Errorf("min and max must not be negative and min must not exceed max; got min %d, max %d", p.Min, p.Max)
	}
	return nil
}

// Size is the headroom p keeps now, in replicas: the rule's size within
// [Min, Max], and no more than admissible, the replicas the queue's quota
// could still admit beyond those it runs (negative: no bound).
func (p Policy) Size(h *History, now time.Time, current, admissible int32) int32 {
	var n int32
	switch p.Mode {
	case Fixed:
		n = p.Replicas
	case Percent:
		n = int32(math.Ceil(float64(current) * float64(p.Percent) / 100))
	case Demand:
		n = h.Demand(now, p.Demand)
	}
	n = max(n, p.Min)
	if p.Max > 0 {
		n = min(n, p.Max)
	}
	if admissible >= 0 {
		n = min(n, admissible)
	}
	return max(n, 0)
}

// observation is the replica count from At on.
type observation struct {
	At       time.Time
	Replicas int32
}

// History is a replica count over time, as far back as sizing needs.
type History struct {
	obs []observation
	// keep is how far back observations are kept; zero keeps all.
	keep time.Duration
}

// NewHistory keeps the observations a DemandRule of window and latency
// reads.
func NewHistory(window, latency time.Duration) *History {
	return &History{keep: window + latency}
}

// Observe records that the count is replicas from at on; at never goes
// back in time.
func (h *History) Observe(at time.Time, replicas int32) {
	if n := len(h.obs); n > 0 {
		last := &h.obs[n-1]
		if last.Replicas == replicas {
			return
		}
		if !at.After(last.At) {
			last.Replicas = replicas
			h.prune(at)
			return
		}
	}
	h.obs = append(h.obs, observation{At: at, Replicas: replicas})
	h.prune(at)
}

// prune drops what no window ending at or after now reads, keeping the
// last observation before the horizon: it is the level there.
func (h *History) prune(now time.Time) {
	if h.keep <= 0 {
		return
	}
	horizon := now.Add(-h.keep)
	i := 0
	for i+1 < len(h.obs) && !h.obs[i+1].At.After(horizon) {
		i++
	}
	h.obs = h.obs[i:]
}

// Demand is the Percentile-th of the rises within r.Latency over the
// moments in (now - r.Window, now] the count rose; zero with none.
func (h *History) Demand(now time.Time, r DemandRule) int32 {
	from := now.Add(-r.Window)
	var samples []int32
	for i, o := range h.obs {
		if !o.At.After(from) || o.At.After(now) || i == 0 || o.Replicas <= h.obs[i-1].Replicas || !r.counts(o.At, now) {
			continue
		}
		if rise := o.Replicas - h.lowest(i, o.At.Add(-r.Latency)); rise > 0 {
			samples = append(samples, rise)
		}
	}
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	rank := int(math.Ceil(float64(r.Percentile) / 100 * float64(len(samples))))
	return samples[max(rank, 1)-1]
}

// counts says whether a scale-up at at counts at now: always without a
// Period; with one, if it is of the last Latency, or of the same time of an
// earlier period, from Latency before to Lead after it.
func (r DemandRule) counts(at, now time.Time) bool {
	if r.Period <= 0 || !at.Before(now.Add(-r.Latency)) {
		return true
	}
	ago := now.Sub(at)
	// The nearest multiple of the period to how long ago it was.
	k := (ago + r.Period/2) / r.Period
	if k < 1 {
		return false
	}
	offset := ago - k*r.Period // positive: earlier in its period than now
	return offset <= r.Latency && -offset <= r.Lead
}

// lowest is the lowest count from since up to observation i: the level at
// since and every observation after it before i.
func (h *History) lowest(i int, since time.Time) int32 {
	low := h.obs[i].Replicas
	for j := i - 1; j >= 0; j-- {
		low = min(low, h.obs[j].Replicas)
		if !h.obs[j].At.After(since) {
			break
		}
	}
	return low
}
