package sim

import (
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-dev/berth/cmd/kubectl-berth/sim/trace"
)

func TestSmoke(t *testing.T) {
	f, err := os.Open("testdata/two-racks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := ReadScenario(f, "two-racks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	req := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("90"), "memory": resource.MustParse("900Gi")}
	var tr trace.Trace
	for i, ns := range []string{"team-a", "team-b", "team-a", "team-b"} {
		tr.Jobs = append(tr.Jobs, trace.Job{ID: "j" + string(rune('0'+i)), Submit: time.Duration(i) * time.Minute, Namespace: ns, LocalQueue: "train",
			Kind: trace.Training, Pods: 3, Requests: req, Topology: trace.Topology{Mode: trace.Required, Level: "example.com/rack"}, RunTime: time.Hour})
	}
	rep, err := Simulate(sc, tr, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		t.Fatal(err)
	}
	if _, err := rep.WritePlots("/tmp/simplots", "png"); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		t.Logf("%s: started %d never %d gaveup %d starts %+v gpuh %+v nodeh %.1f scaleups %+v evict %d", r.Policy, r.Started, r.NeverStarted, r.GaveUp, r.StartTimes, r.GPUHours, r.NodeHours, r.ScaleUps, r.Evictions)
	}
}
