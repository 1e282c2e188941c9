package trace

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// validJob is a job that passes validation, for tests to break one field
// of.
func validJob(id string) Job {
	return Job{
		ID:         id,
		Submit:     90 * time.Second,
		Namespace:  "team-a",
		LocalQueue: "gpu",
		Kind:       Training,
		Pods:       2,
		Requests: corev1.ResourceList{
			"nvidia.com/gpu":      resource.MustParse("8"),
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
		},
		RunTime: 2 * time.Hour,
	}
}

// with returns validJob(id) changed by f.
func with(id string, f func(*Job)) Job {
	j := validJob(id)
	f(&j)
	return j
}

// sameTrace fails the test unless got and want are semantically equal
// (quantities compared by value, not by their cached strings).
func sameTrace(t *testing.T, got, want Trace) {
	t.Helper()
	if !equality.Semantic.DeepEqual(got, want) {
		var g, w bytes.Buffer
		_ = WriteYAML(&g, got)
		_ = WriteYAML(&w, want)
		t.Errorf("traces differ;\ngot:\n%s\nwant:\n%s", g.String(), w.String())
	}
}

// wantErr checks err against the substrings it must contain; none means
// no error is wanted.
func wantErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error; want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

// golden compares got with testdata/golden/name, rewriting it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s changed; got:\n%s", name, got)
	}
}
