package trace

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that reads and writes as a Go duration
// string ("90s", "2h") in JSON and YAML, so that traces and mixes are
// written by hand in the unit people think in rather than in nanoseconds.
// It also reads a plain number, or a string holding one, as seconds.
type Duration struct {
	time.Duration
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON reads a Go duration string or a number of seconds; null
// leaves the duration unchanged, as encoding/json does for other types.
func (d *Duration) UnmarshalJSON(data []byte) error {
	s := strings.TrimSpace(string(data))
	if s == "null" {
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("reading duration %s: %w", data, err)
		}
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// parseDuration reads a Go duration ("90s", "1h30m") or plain seconds
// ("90", "1.5"); the empty string is zero so that optional cells and
// fields may be left blank.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return secondsToDuration(f)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a Go duration like \"90s\" or \"2h\", or a number of seconds", s)
	}
	return d, nil
}

// secondsToDuration converts seconds to a duration, refusing values a
// time.Duration cannot hold (about ±292 years) instead of wrapping.
func secondsToDuration(f float64) (time.Duration, error) {
	ns := f * float64(time.Second)
	if math.IsNaN(ns) || ns >= math.MaxInt64 || ns < math.MinInt64 {
		return 0, fmt.Errorf("invalid duration %v seconds: want a finite number of seconds within ±292 years", f)
	}
	return time.Duration(math.Round(ns)), nil
}
