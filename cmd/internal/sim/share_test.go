package sim

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// TestSharesSumToTheWhole: team-a works alone for the first hour, then
// team-b joins for half an hour. Each share column averages over the same
// samples, so it sums to 100 % in the JSON and, rounded, in the table; and
// the mean share is the mean of the series the figure plots.
func TestSharesSumToTheWhole(t *testing.T) {
	sc := readScenarioFile(t, "testdata/two-racks.yaml")
	long := gangJob("long", "team-a", 0, 2, trace.Topology{})
	long.RunTime = 2 * time.Hour
	tr := trace.Trace{Jobs: []trace.Job{long, gangJob("short", "team-b", time.Hour, 1, trace.Topology{})}}
	tr.Jobs[1].RunTime = 30 * time.Minute
	rep, err := Simulate(sc, tr, Options{Seed: 1, Policies: []string{Uncoordinated}})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	if len(res.Tenants) != 2 {
		t.Fatalf("tenants %+v, want team-a and team-b", res.Tenants)
	}
	var mean, entitled float64
	for i, tn := range res.Tenants {
		mean += tn.MeanShare
		entitled += tn.EntitledShare
		var sum float64
		for _, p := range res.shares[i].Points {
			sum += p.Value
		}
		if got := sum / float64(len(res.shares[0].Points)); math.Abs(got-tn.MeanShare) > 1e-9 {
			t.Errorf("%s: the plotted series averages %.4f, the table says %.4f", tn.ClusterQueue, got, tn.MeanShare)
		}
	}
	if math.Abs(mean-1) > 1e-9 || math.Abs(entitled-1) > 1e-9 {
		t.Errorf("shares sum to %.4f held and %.4f entitled, want 1 each: %+v", mean, entitled, res.Tenants)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^uncoordinated +team-\w +\S+ +([\d.]+)% +([\d.]+)%$`)
	var held, weight int
	for _, m := range row.FindAllStringSubmatch(table.String(), -1) {
		held += tenths(t, m[1])
		weight += tenths(t, m[2])
	}
	if held != 1000 || weight != 1000 {
		t.Errorf("the table's share columns sum to %d and %d tenths of a percent, want 1000:\n%s", held, weight, table.String())
	}
}

// tenths reads "33.3" as 333.
func tenths(t *testing.T, s string) int {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(math.Round(f * 10))
}
