package notify

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// maxEvents is how many recent events of a pod a report carries.
const maxEvents = 5

// Enricher adds what a report needs from the API server when it is sent:
// the tail of the previous container's log (pods/log, bounded in lines and
// bytes) and the pod's recent events. It reads only the failed pod's.
type Enricher struct {
	client kubernetes.Interface
}

// NewEnricher returns an Enricher using the clientset.
func NewEnricher(c kubernetes.Interface) *Enricher { return &Enricher{client: c} }

// Enrich fills the report's LogTail and Events from its first pod failure.
// What cannot be read is left out: a report without its log is still
// worth sending.
func (e *Enricher) Enrich(ctx context.Context, r *Report) {
	var f *Failure
	for i := range r.Failures {
		if r.Failures[i].Pod != "" {
			f = &r.Failures[i]
			break
		}
	}
	if e == nil || f == nil {
		return
	}
	if r.LogLines > 0 && f.Container != "" && hasPreviousLog(f.Kind) {
		r.LogTail = e.logTail(ctx, r.Gang.Namespace, f.Pod, f.Container, r.LogLines, r.LogBytes)
	}
	r.Events = e.events(ctx, r.Gang.Namespace, f.Pod)
}

// hasPreviousLog reports whether a failure of the kind leaves a previous
// container whose log explains it.
func hasPreviousLog(k Kind) bool { return k == Restarted || k == OOMKilled || k == CrashLoopBackOff }

func (e *Enricher) logTail(ctx context.Context, ns, pod, container string, lines, bytes int64) string {
	opts := &corev1.PodLogOptions{Container: container, Previous: true, TailLines: &lines}
	if bytes > 0 {
		opts.LimitBytes = &bytes
	}
	raw, err := e.client.CoreV1().Pods(ns).GetLogs(pod, opts).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(raw), "\n")
}

// events lists the newest events about the pod, oldest first, as
// "Reason: message".
func (e *Enricher) events(ctx context.Context, ns, pod string) []string {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
		fields.OneTermEqualSelector("involvedObject.name", pod))
	list, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return nil
	}
	items := list.Items
	if len(items) > maxEvents {
		items = items[len(items)-maxEvents:]
	}
	var out []string
	for _, ev := range items {
		line := fmt.Sprintf("%s: %s", ev.Reason, ev.Message)
		if ev.Count > 1 {
			line += fmt.Sprintf(" (×%d)", ev.Count)
		}
		out = append(out, line)
	}
	return out
}
