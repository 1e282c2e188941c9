// Package soakstats judges whether berth's processes grew during a soak,
// from periodic readings of their memory and goroutines.
//
// A process is judged over each stretch of its life in one role: a
// replica that takes the lease over starts its informers' handlers, the
// engine and the workers, so it holds more memory and many more
// goroutines than it did as a follower — a step, not growth. A stretch
// grows when the mean of its last quarter exceeds that of its first by
// more than half (goroutines: half, plus 20).
package soakstats

import (
	"fmt"
	"time"
)

// Sample is one reading of one process.
type Sample struct {
	// At is the time since the soak started.
	At time.Duration
	// Process names one process (replica and pid).
	Process string
	// Leader says whether the process held the lease.
	Leader     bool
	RSSKiB     int64
	Goroutines int64
}

// Stretch is the consecutive samples of one process in one role.
type Stretch struct {
	Process string
	Leader  bool
	Samples []Sample
}

// Name is the process and its role, e.g. "berth-0 pid 42, leader from 9m0s".
func (s Stretch) Name() string {
	role := "follower"
	if s.Leader {
		role = "leader"
	}
	return fmt.Sprintf("%s, %s from %s", s.Process, role, s.Samples[0].At.Round(time.Second))
}

// Life is how long the stretch lasted.
func (s Stretch) Life() time.Duration { return s.Samples[len(s.Samples)-1].At - s.Samples[0].At }

// Quarters returns the mean RSS (KiB) and goroutines of the first and the
// last quarter of the stretch's samples.
func (s Stretch) Quarters() (rssFirst, rssLast, grFirst, grLast float64) {
	n := max(len(s.Samples)/4, 1)
	mean := func(ss []Sample) (float64, float64) {
		var rss, gr float64
		for _, x := range ss {
			rss += float64(x.RSSKiB)
			gr += float64(x.Goroutines)
		}
		return rss / float64(len(ss)), gr / float64(len(ss))
	}
	rssFirst, grFirst = mean(s.Samples[:n])
	rssLast, grLast = mean(s.Samples[len(s.Samples)-n:])
	return rssFirst, rssLast, grFirst, grLast
}

// Stretches splits the samples (in time order) by process, and each
// process's samples where its role changes, in order of first sample.
func Stretches(samples []Sample) []Stretch {
	var out []Stretch
	open := map[string]int{} // process → index of its current stretch
	for _, x := range samples {
		i, ok := open[x.Process]
		if !ok || out[i].Leader != x.Leader {
			i = len(out)
			open[x.Process] = i
			out = append(out, Stretch{Process: x.Process, Leader: x.Leader})
		}
		out[i].Samples = append(out[i].Samples, x)
	}
	return out
}

// Growth describes each stretch that lasted at least minLife and grew.
func Growth(samples []Sample, minLife time.Duration) []string {
	var out []string
	for _, s := range Stretches(samples) {
		if s.Life() < minLife {
			continue
		}
		rssFirst, rssLast, grFirst, grLast := s.Quarters()
		if rssLast > 1.5*rssFirst || grLast > 1.5*grFirst+20 {
			out = append(out, fmt.Sprintf("%s, over %s: RSS %.0f → %.0f KiB, goroutines %.0f → %.0f",
				s.Name(), s.Life().Round(time.Second), rssFirst, rssLast, grFirst, grLast))
		}
	}
	return out
}
