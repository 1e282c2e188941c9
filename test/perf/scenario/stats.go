package scenario

import (
	"slices"
	"time"
)

// Summary describes a set of durations.
type Summary struct {
	// Count of values.
	Count int
	// Mean, and the 50th, 90th, 95th and 99th percentiles (nearest rank),
	// and the largest value.
	Mean, P50, P90, P95, P99, Max time.Duration
}

// Summarize returns the summary of values; values is not modified.
func Summarize(values []time.Duration) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	var sum time.Duration
	for _, v := range sorted {
		sum += v
	}
	return Summary{
		Count: len(sorted),
		Mean:  sum / time.Duration(len(sorted)),
		P50:   percentile(sorted, 50),
		P90:   percentile(sorted, 90),
		P95:   percentile(sorted, 95),
		P99:   percentile(sorted, 99),
		Max:   sorted[len(sorted)-1],
	}
}

// percentile is the nearest-rank percentile p of sorted, non-empty values:
// the smallest value at least p% of the values are less or equal to.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n)
	return sorted[max(rank, 1)-1]
}
