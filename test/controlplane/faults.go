package controlplane

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// faultStages are berth's own kwok Stages (stages/): container failures a
// pod asks for by annotation.
//
//go:embed stages/*.yaml
var faultStages embed.FS

// Annotations read by the fault Stages.
const (
	// TerminateAnnotation makes kwok record that the pod's containers
	// terminated with this reason (OOMKilled: exit code 137, else 1) and
	// restarted, once.
	TerminateAnnotation = "fault.stage.berth.dev/terminate"
	// CrashLoopAnnotation makes kwok put the pod's containers in
	// CrashLoopBackOff after one failed restart, once.
	CrashLoopAnnotation = "fault.stage.berth.dev/crash-loop"
	// FaultAfterAnnotation is how long after the pod runs the fault comes
	// (a Go duration; default 1 s).
	FaultAfterAnnotation = "fault.stage.berth.dev/after"
	// podCompleteWeightAnnotation weighs kwok's pod-complete Stage; 0
	// keeps it from being picked over a fault Stage.
	podCompleteWeightAnnotation = "pod-complete.stage.kwok.x-k8s.io/weight"
)

// Terminate returns pod annotations that make kwok terminate and restart
// the pod's containers with reason (e.g. "OOMKilled") after d.
func Terminate(reason string, d time.Duration) map[string]string {
	return map[string]string{TerminateAnnotation: reason, FaultAfterAnnotation: d.String(), podCompleteWeightAnnotation: "0"}
}

// CrashLoop returns pod annotations that make kwok put the pod's
// containers in CrashLoopBackOff after d.
func CrashLoop(d time.Duration) map[string]string {
	return map[string]string{CrashLoopAnnotation: "true", FaultAfterAnnotation: d.String(), podCompleteWeightAnnotation: "0"}
}

// writeFaultStages writes the fault Stages into dir and returns their
// paths.
func writeFaultStages(dir string) ([]string, error) {
	entries, err := faultStages.ReadDir("stages")
	if err != nil {
		return nil, fmt.Errorf("reading the fault stages: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		data, err := faultStages.ReadFile("stages/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading fault stage %s: %w", e.Name(), err)
		}
		path := filepath.Join(dir, e.Name())
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("writing fault stage %s: %w", path, err)
		}
		out = append(out, path)
	}
	return out, nil
}
