package sim

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// TestSLOPerClass: the SLO counts are kept per class as well as in all; a
// replica that started late or never misses, and jobs without an SLO are
// not counted.
func TestSLOPerClass(t *testing.T) {
	replica := func(class string, slo, waited time.Duration) *job {
		j := &job{spec: trace.Job{Class: class, Submit: time.Hour, SLO: slo}, firstStart: -1}
		if waited >= 0 {
			j.firstStart = time.Hour + waited
		}
		return j
	}
	const never = -1
	for _, tc := range []struct {
		name string
		jobs []*job
		want SLO
	}{
		{name: "no job has an SLO", jobs: []*job{replica("train", 0, time.Minute)}, want: SLO{}},
		{
			name: "within, at and past the SLO, and never started",
			jobs: []*job{
				replica("chat", 3*time.Minute, 0),
				replica("chat", 3*time.Minute, 3*time.Minute),
				replica("chat", 3*time.Minute, 3*time.Minute+time.Second),
				replica("chat", 3*time.Minute, never),
			},
			want: SLO{Jobs: 4, Met: 2, Attainment: 0.5, Classes: []ClassSLO{{Class: "chat", Jobs: 4, Met: 2, Attainment: 0.5}}},
		},
		{
			name: "two services, sorted by class, training left out",
			jobs: []*job{
				replica("embed", time.Minute, 0),
				replica("train", 0, never),
				replica("chat", time.Minute, time.Hour),
				replica("embed", time.Minute, 2*time.Minute),
				replica("embed", time.Minute, time.Second),
				replica("embed", time.Minute, 0),
			},
			want: SLO{Jobs: 5, Met: 3, Attainment: 0.6, Classes: []ClassSLO{
				{Class: "chat", Jobs: 1, Met: 0, Attainment: 0},
				{Class: "embed", Jobs: 4, Met: 3, Attainment: 0.75},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sloOf(tc.jobs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// classSLO is the SLO attainment of class in r.
func classSLO(r PolicyResult, class string) ClassSLO {
	for _, c := range r.SLO.Classes {
		if c.Class == class {
			return c
		}
	}
	return ClassSLO{Class: class}
}

// TestServingReclaimScenario runs the shipped serving-reclaim scenario and
// checks what docs/coordination.md and docs/serving.md report of it: on
// racks that cannot grow, berth starts more rack-bound chat replicas
// within their 3-minute SLO than either alternative (11 of 13, one replica
// of tolerance), by preempting training that borrows (8 evictions, two of
// tolerance), and every embed replica in time.
func TestServingReclaimScenario(t *testing.T) {
	sc, tr := shipped(t, "serving-reclaim")
	rep, by := simulateByPolicy(t, sc, tr)
	b := by[Berth]
	chat := classSLO(b, "chat")
	if chat.Jobs != 13 || chat.Met < 10 || chat.Met > 12 {
		t.Errorf("berth met the SLO for %d of %d chat replicas, want 11 (±1) of 13", chat.Met, chat.Jobs)
	}
	for _, other := range []string{Uncoordinated, QuotaOnly} {
		if o := classSLO(by[other], "chat"); o.Met >= chat.Met {
			t.Errorf("%s met the SLO for %d chat replicas, berth %d", other, o.Met, chat.Met)
		}
	}
	if b.Evictions < 6 || b.Evictions > 10 {
		t.Errorf("berth evicted %d gangs, want about 8", b.Evictions)
	}
	for _, s := range b.StartTimes {
		if s.Class == "chat" && s.Jobs != chat.Jobs {
			t.Errorf("berth started %d of %d chat replicas", s.Jobs, chat.Jobs)
		}
	}
	if embed := classSLO(b, "embed"); embed.Met != embed.Jobs {
		t.Errorf("berth met the SLO for %d of %d embed replicas, want all", embed.Met, embed.Jobs)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	met := fmt.Sprintf("%.1f%% (%d/%d)", 100*chat.Attainment, chat.Met, chat.Jobs)
	if !regexp.MustCompile(`(?m)^berth +chat +` + regexp.QuoteMeta(met) + `$`).MatchString(table.String()) {
		t.Errorf("the table has no SLO row for berth's chat replicas saying %s:\n%s", met, table.String())
	}
}
