package notify

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"
)

func TestEventSink(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(*Report)
		wantOn string
	}{
		{"on the job", func(r *Report) { r.Gang.JobAPIVersion, r.Gang.JobUID = "batch/v1", "job-1" }, "{kind=Job,apiVersion=batch/v1}"},
		{"on the Workload of a gang without a job", func(r *Report) { r.Gang.JobKind, r.Gang.JobName = "Workload", "wl" },
			"{kind=Workload,apiVersion=berth.dev/v1alpha1}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(1)
			rec.Verbose = true
			r := sampleReport()
			tc.edit(r)
			if err := NewEventSink(rec).Send(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			got := <-rec.Events
			for _, want := range []string{"Warning " + EventReason + " Notify " + r.Headline(), "train-x-a container train on h200-r7-0", tc.wantOn} {
				if !strings.Contains(got, want) {
					t.Errorf("event %q lacks %q", got, want)
				}
			}
			if strings.Contains(got, "`") {
				t.Errorf("event %q keeps Slack's markup", got)
			}
		})
	}
}
