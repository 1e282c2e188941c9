package notify

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEnricher(t *testing.T) {
	var objs []runtime.Object
	for i := range 7 {
		objs = append(objs, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("e%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "train-x-a", Namespace: "team-a"},
			Reason:         "BackOff", Message: fmt.Sprintf("attempt %d", i), Count: int32(i),
		})
	}
	cases := []struct {
		name    string
		kind    Kind
		lines   int64
		wantLog bool
	}{
		{"an OOM kill gets the previous container's log", OOMKilled, 20, true},
		{"no log with logLines 0", OOMKilled, 0, false},
		{"no log for an image that never ran", ImagePullBackOff, 20, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(objs...)
			r := sampleReport()
			r.Kind, r.LogLines, r.LogBytes, r.LogTail, r.Events = tc.kind, tc.lines, 2048, "", nil
			for i := range r.Failures {
				r.Failures[i].Kind = tc.kind
			}
			NewEnricher(cs).Enrich(context.Background(), r)
			// client-go's fake answers every log request "fake logs".
			if got := r.LogTail == "fake logs"; got != tc.wantLog {
				t.Errorf("LogTail = %q, want a log: %v", r.LogTail, tc.wantLog)
			}
			if len(r.Events) != maxEvents || r.Events[maxEvents-1] != "BackOff: attempt 6 (×6)" {
				t.Errorf("Events = %q, want the newest %d with their counts", r.Events, maxEvents)
			}
		})
	}
}
