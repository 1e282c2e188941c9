package faults_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// minLife is how long a process must have lived for its growth to be
// judged: shorter lives are mostly start-up.
const minLife = 10 * time.Minute

// lifetime is the samples of one process.
type lifetime struct {
	process string
	samples []sample
}

// lifetimes groups the samples by process, in order of first sample.
func (s *soak) lifetimes() []lifetime {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []lifetime
	idx := map[string]int{}
	for _, smp := range s.samples {
		i, ok := idx[smp.process]
		if !ok {
			i = len(out)
			idx[smp.process] = i
			out = append(out, lifetime{process: smp.process})
		}
		out[i].samples = append(out[i].samples, smp)
	}
	return out
}

// quarters returns the mean RSS (KiB) and goroutines of the first and the
// last quarter of a lifetime's samples.
func (l lifetime) quarters() (rssFirst, rssLast, grFirst, grLast float64) {
	n := max(len(l.samples)/4, 1)
	mean := func(ss []sample) (float64, float64) {
		var rss, gr float64
		for _, s := range ss {
			rss += float64(s.rssKiB)
			gr += float64(s.goroutines)
		}
		return rss / float64(len(ss)), gr / float64(len(ss))
	}
	rssFirst, grFirst = mean(l.samples[:n])
	rssLast, grLast = mean(l.samples[len(l.samples)-n:])
	return rssFirst, rssLast, grFirst, grLast
}

func (l lifetime) life() time.Duration {
	return l.samples[len(l.samples)-1].at - l.samples[0].at
}

// growth describes each process that lived minLife and whose memory or
// goroutines grew by more than half from the first quarter of its life to
// the last.
func (s *soak) growth() []string {
	var out []string
	for _, l := range s.lifetimes() {
		if l.life() < minLife {
			continue
		}
		rssFirst, rssLast, grFirst, grLast := l.quarters()
		if rssLast > 1.5*rssFirst || grLast > 1.5*grFirst+20 {
			out = append(out, fmt.Sprintf("%s over %s: RSS %.0f → %.0f KiB, goroutines %.0f → %.0f",
				l.process, l.life().Round(time.Second), rssFirst, rssLast, grFirst, grLast))
		}
	}
	return out
}

// publish reports the soak's figures, and writes them to the report file
// when one is set.
func (s *soak) publish(settings soakSettings, observed int, violations []string) {
	s.mu.Lock()
	var b strings.Builder
	fmt.Fprintf(&b, "soak of %s, a fault every %s: %d jobs, %d object versions checked, %d invariant violations\n\n",
		settings.duration, settings.faultEvery, s.created, observed, len(violations))
	kinds := make([]string, 0, len(s.faults))
	for k := range s.faults {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	b.WriteString("| fault | times |\n|---|---|\n")
	for _, k := range kinds {
		fmt.Fprintf(&b, "| %s | %d |\n", k, s.faults[k])
	}
	for i, p := range s.proxies {
		fmt.Fprintf(&b, "\nAPI faults injected by proxy %d: %v\n", i, p.Injected())
	}
	s.mu.Unlock()
	b.WriteString("\n| process | life | RSS first → last quarter (MiB) | goroutines first → last quarter |\n|---|---|---|---|\n")
	for _, l := range s.lifetimes() {
		rssFirst, rssLast, grFirst, grLast := l.quarters()
		fmt.Fprintf(&b, "| %s | %s | %.1f → %.1f | %.0f → %.0f |\n", l.process, l.life().Round(time.Second),
			rssFirst/1024, rssLast/1024, grFirst, grLast)
	}
	AddReportEntry("soak figures", b.String())
	if settings.report != "" {
		Expect(os.WriteFile(settings.report, []byte(b.String()), 0o600)).To(Succeed())
	}
}
