package tools

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

// The fault Stages berth's harness gives kwok (test/controlplane/stages),
// checked with kwok's own selector and template code: which pods they act
// on, after how long, and what they write.

// faultStages loads berth's fault Stages beside the Stages of kwok's the
// harness gives kwok (as test/tools/build.sh picks them), so that the test
// sees which Stage kwok would pick among all that match.
func faultStages(t *testing.T) lifecycle.Lifecycle {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok").Output()
	if err != nil {
		t.Fatalf("locating the kwok module: %v", err)
	}
	kwok := filepath.Join(strings.TrimSpace(string(out)), "kustomize", "stage", "pod")
	objs, err := config.Load(context.Background(), "../../controlplane/stages/pod-container-fault.yaml",
		filepath.Join(kwok, "fast", "pod-ready.yaml"), filepath.Join(kwok, "general", "pod-complete.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []*internalversion.Stage
	for _, o := range objs {
		if s, ok := o.(*internalversion.Stage); ok {
			stages = append(stages, s)
		}
	}
	lc, err := lifecycle.NewLifecycle(stages)
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// runningPod is a Running pod of one container "train" with the
// annotations, and a last termination when terminated is set.
func runningPod(annotations map[string]string, terminated bool) map[string]any {
	cs := map[string]any{"name": "train", "restartCount": 0, "ready": true, "state": map[string]any{"running": map[string]any{}}}
	if terminated {
		cs["lastState"] = map[string]any{"terminated": map[string]any{"reason": "OOMKilled"}}
	}
	ann := map[string]any{}
	for k, v := range annotations {
		ann[k] = v
	}
	return map[string]any{
		"metadata": map[string]any{"name": "p", "annotations": ann, "ownerReferences": []any{map[string]any{"kind": "Job", "name": "j"}}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "train", "image": "x"}}},
		"status": map[string]any{"phase": "Running", "containerStatuses": []any{cs},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
	}
}

func TestFaultStages(t *testing.T) {
	lc := faultStages(t)
	renderer := gotpl.NewRenderer(gotpl.FuncMap{"Now": func() string { return time.Now().UTC().Format(time.RFC3339) }})
	cases := []struct {
		name        string
		annotations map[string]string
		terminated  bool
		stage       string // "" when none may act
		delay       time.Duration
		writes      []string
	}{
		{"an OOM kill", map[string]string{"fault.stage.berth.dev/terminate": "OOMKilled", "fault.stage.berth.dev/after": "2s",
			"pod-complete.stage.kwok.x-k8s.io/weight": "0"}, false,
			"pod-container-terminate", 2 * time.Second, []string{`"reason":"OOMKilled"`, `"exitCode":137`, `"restartCount":1`}},
		{"an error exit", map[string]string{"fault.stage.berth.dev/terminate": "Error", "pod-complete.stage.kwok.x-k8s.io/weight": "0"}, false,
			"pod-container-terminate", time.Second, []string{`"reason":"Error"`, `"exitCode":1`}},
		{"a crash loop", map[string]string{"fault.stage.berth.dev/crash-loop": "true", "pod-complete.stage.kwok.x-k8s.io/weight": "0"}, false,
			"pod-container-crash-loop", time.Second, []string{`"reason":"CrashLoopBackOff"`, `"ready":false`}},
		{"once only: then the pod runs to completion", map[string]string{"fault.stage.berth.dev/terminate": "OOMKilled",
			"pod-complete.stage.kwok.x-k8s.io/weight": "0"}, true, "pod-complete", time.Second, nil},
		{"pods that do not ask run to completion", map[string]string{"other": "x"}, false, "pod-complete", time.Second, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := runningPod(tc.annotations, tc.terminated)
			ev := &lifecycle.Event{Annotations: tc.annotations, Data: pod}
			st, err := lc.Match(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			if st == nil || st.Name() != tc.stage {
				t.Fatalf("stage %v, want %s", st, tc.stage)
			}
			if tc.writes == nil {
				return // kwok's own Stage: what it writes is kwok's
			}
			if d, _, _ := st.Delay(context.Background(), ev, time.Now()); d != tc.delay {
				t.Errorf("delay %s, want %s", d, tc.delay)
			}
			var patches []string
			var events int
			_, err = st.DoSteps(0, nil, pod, renderer,
				func(*internalversion.StageEvent) error { events++; return nil },
				func() error { t.Error("the stage deletes the pod"); return nil },
				func(p *lifecycle.Patch) error { patches = append(patches, string(p.Data)); return nil },
				func(*lifecycle.Apply) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(patches, "\n")
			if !json.Valid([]byte(patches[0])) {
				t.Fatalf("patch is not JSON: %s", got)
			}
			for _, w := range tc.writes {
				if !strings.Contains(got, w) {
					t.Errorf("patch %s lacks %s", got, w)
				}
			}
			if events != 1 {
				t.Errorf("%d events, want the kubelet's BackOff", events)
			}
		})
	}
}
