package soakstats

import (
	"encoding/csv"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// trace is a process's readings every 5 s for d, leader from promote on
// (never when promote < 0), with RSS and goroutines by role plus growth
// per minute.
func trace(process string, d, promote time.Duration, growKiBPerMin int64) []Sample {
	var out []Sample
	for at := time.Duration(0); at <= d; at += 5 * time.Second {
		s := Sample{At: at, Process: process, RSSKiB: 60_000, Goroutines: 52}
		if promote >= 0 && at >= promote {
			s.Leader, s.RSSKiB, s.Goroutines = true, 90_000, 310
		}
		s.RSSKiB += growKiBPerMin * int64(at/time.Minute)
		out = append(out, s)
	}
	return out
}

func TestGrowth(t *testing.T) {
	cases := []struct {
		name    string
		samples []Sample
		want    []string // substrings, one per finding
	}{
		{"a steady follower", trace("a", 30*time.Minute, -1, 0), nil},
		{"a follower promoted to leader is a step, not growth", trace("a", 30*time.Minute, 10*time.Minute, 0), nil},
		{"a leader that leaks", trace("a", 30*time.Minute, 0, 3000), []string{"a, leader from 0s, over 30m0s: RSS"}},
		{"a leak after promotion", trace("a", 40*time.Minute, 5*time.Minute, 3000), []string{"a, leader from 5m0s"}},
		{"short lives are not judged", trace("a", 9*time.Minute, 0, 10000), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Growth(tc.samples, 10*time.Minute)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %d findings", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("finding %d = %q, want %q in it", i, got[i], w)
				}
			}
		})
	}
}

func TestStretches(t *testing.T) {
	samples := append(trace("a", 20*time.Minute, 10*time.Minute, 0), trace("b", 20*time.Minute, -1, 0)...)
	got := Stretches(samples)
	var names []string
	for _, s := range got {
		names = append(names, s.Name())
	}
	want := "a, follower from 0s|a, leader from 10m0s|b, follower from 0s"
	if strings.Join(names, "|") != want {
		t.Errorf("stretches %q, want %q", names, want)
	}
}

// readTrace reads readings recorded during a soak: unix time, pid, VmRSS
// in KiB, goroutines, leader (1 or 0), one line each.
func readTrace(t *testing.T, path string) []Sample {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []Sample
	var start int64
	for i, r := range rows[1:] {
		var v [5]int64
		for j := range v {
			if v[j], err = strconv.ParseInt(r[j], 10, 64); err != nil {
				t.Fatalf("line %d: %v", i+2, err)
			}
		}
		if start == 0 {
			start = v[0]
		}
		out = append(out, Sample{At: time.Duration(v[0]-start) * time.Second, Process: "pid " + r[1],
			RSSKiB: v[2], Goroutines: v[3], Leader: v[4] == 1})
	}
	return out
}

// TestGrowthOnARecordedSoak judges readings of two berth-controller
// replicas taken every 5 s during 17 minutes of `make soak` (a leader
// killed, both restarted, a leader paused past its lease): no stretch in
// one role grows, while judging whole lives would call each promotion
// growth.
func TestGrowthOnARecordedSoak(t *testing.T) {
	samples := readTrace(t, "testdata/soak-trace.csv")
	if got := Growth(samples, 2*time.Minute); len(got) > 0 {
		t.Errorf("growth found in the recorded soak: %q", got)
	}
	blind := make([]Sample, len(samples))
	for i, s := range samples {
		s.Leader = false
		blind[i] = s
	}
	if got := Growth(blind, 2*time.Minute); len(got) == 0 {
		t.Error("judged by whole lives, a follower promoted to leader should look like growth")
	}
}
