package admission

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The decisions check replays generated inputs through the fuzz harness and
// compares a digest of every decision the engine makes (each cycle's Result
// and each Explain answer) with the digests recorded by an earlier version.
// A refactoring that must not change what the engine decides records with
// the old engine (-decisions.update) and checks with the new; the recorded
// digests in testdata/decisions keep guarding every later change. A change
// that alters decisions on purpose records them again and says why. A new
// target records only its own file: -run TestDecisionsUnchanged/NAME with
// -decisions.update.
var (
	decisionsN      = flag.Int("decisions.n", 1000, "generated inputs replayed per fuzz target")
	decisionsDir    = flag.String("decisions.dir", filepath.Join("testdata", "decisions"), "where the recorded digests are")
	decisionsUpdate = flag.Bool("decisions.update", false, "record the digests instead of comparing them")
	decisionsFor    = flag.Duration("decisions.for", 0, "with -decisions.update: record as many inputs as this much time allows instead of -decisions.n")
)

// record adds decisions to the run's digest.
func (r *fuzzRun) record(vs ...any) {
	if r.decisions == nil {
		return
	}
	for _, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			r.t.Fatalf("encoding a decision: %v", err)
		}
		r.decisions.Write(b)
	}
}

// decisionInput is generated input i: the same bytes on every machine.
func decisionInput(i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	b := make([]byte, 24)
	for j := range b {
		b[j] = byte(rng.Uint32())
	}
	return b
}

func TestDecisionsUnchanged(t *testing.T) {
	for _, target := range []struct {
		name  string
		setup func(*testing.T, []byte) *fuzzRun
		run   func(*fuzzRun)
	}{
		{"engine", fuzzSetup, runEngine}, {"convergence", fuzzSetup, runConvergence}, {"facts", fuzzSetup, runFacts},
		{"taints", fuzzSetupTainted, runEngine}, {"hosts", fuzzSetupHosts, runEngine},
		{"topopreempt", fuzzSetupPreempt, runPreemptTopology},
	} {
		t.Run(target.name, func(t *testing.T) {
			path := filepath.Join(*decisionsDir, target.name+".txt")
			got := replayDecisions(t, target.setup, target.run)
			if *decisionsUpdate {
				writeDecisions(t, path, got)
				return
			}
			want := readDecisions(t, path)
			if len(want) < len(got) {
				t.Fatalf("%s holds %d digests, %d inputs asked for: record them with -decisions.update", path, len(want), len(got))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("input %d (bytes %x): decisions differ from those recorded in %s (%s, now %s)", i, decisionInput(i), path, want[i], got[i])
				}
			}
		})
	}
}

// replayDecisions digests the decisions for -decisions.n inputs, or, when
// recording with -decisions.for, for as many as that time allows: a twin
// check then replays exactly the inputs the old engine got through.
func replayDecisions(t *testing.T, setup func(*testing.T, []byte) *fuzzRun, run func(*fuzzRun)) []string {
	var got []string
	deadline := time.Now().Add(*decisionsFor)
	for i := 0; ; i++ {
		if *decisionsUpdate && *decisionsFor > 0 {
			if time.Now().After(deadline) {
				break
			}
		} else if i >= *decisionsN {
			break
		}
		r := setup(t, decisionInput(i))
		r.decisions = fnv.New64a()
		run(r)
		if r.stuck {
			t.Logf("input %d (bytes %x): no fixed point", i, decisionInput(i))
		}
		got = append(got, fmt.Sprintf("%d %016x", i, r.decisions.Sum64()))
	}
	t.Logf("%d inputs replayed", len(got))
	return got
}

func writeDecisions(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readDecisions(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("reading recorded decisions: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return out
}
