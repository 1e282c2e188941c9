package faults_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/berth-dev/berth/test/reliability/soakstats"
)

// minLife is how long a process must have stayed in one role for its
// growth to be judged: shorter stretches are mostly start-up.
const minLife = 10 * time.Minute

// growth describes each stretch of a process in one role that lasted
// minLife and grew (soakstats).
func (s *soak) growth() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return soakstats.Growth(s.samples, minLife)
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
	b.WriteString("\n| process and role | lasted | RSS first → last quarter (MiB) | goroutines first → last quarter |\n|---|---|---|---|\n")
	s.mu.Lock()
	stretches := soakstats.Stretches(s.samples)
	s.mu.Unlock()
	for _, st := range stretches {
		rssFirst, rssLast, grFirst, grLast := st.Quarters()
		fmt.Fprintf(&b, "| %s | %s | %.1f → %.1f | %.0f → %.0f |\n", st.Name(), st.Life().Round(time.Second),
			rssFirst/1024, rssLast/1024, grFirst, grLast)
	}
	AddReportEntry("soak figures", b.String())
	if settings.report != "" {
		Expect(os.WriteFile(settings.report, []byte(b.String()), 0o600)).To(Succeed())
	}
}
