package sim

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// TestTheLogNamesABackloggedAutoscaler: ten one-node gangs at once on two
// racks of two running nodes, with a 30 s answer timeout. Six book new
// nodes; the modelled autoscaler serves one request per 10 s scan, so the
// last ones time out behind the others. The decisions log must say so,
// not ask whether cluster-autoscaler has ProvisioningRequests enabled.
func TestTheLogNamesABackloggedAutoscaler(t *testing.T) {
	b, err := readFileString("testdata/two-racks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b = strings.Replace(b, "    capacityNotFoundSeconds: 300\n", "    capacityNotFoundSeconds: 300\n    answerTimeoutSeconds: 30\n", 1)
	sc := readScenarioString(t, b)
	var tr trace.Trace
	for i := range 10 {
		tr.Jobs = append(tr.Jobs, gangJob(fmt.Sprintf("j%d", i), []string{"team-a", "team-b"}[i%2], 0, 1, trace.Topology{Mode: trace.Required, Level: "example.com/rack"}))
	}
	var log bytes.Buffer
	if _, err := Simulate(sc, tr, Options{Seed: 1, Policies: []string{Berth}, Log: &log}); err != nil {
		t.Fatal(err)
	}
	text := log.String()
	if strings.Contains(text, "ProvisioningRequests enabled") {
		t.Errorf("the log blames the autoscaler's configuration:\n%s", text)
	}
	for _, want := range []string{"no answer within the answer timeout: the simulated cluster-autoscaler is backlogged, not misconfigured",
		"serves one ProvisioningRequest per 10s scan", "requests queued ahead of it"} {
		if !strings.Contains(text, want) {
			t.Errorf("the log does not say %q:\n%s", want, text)
		}
	}
}

// readFileString reads a file as a string.
func readFileString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
