// Package notify reports the failures of gangs berth admitted — container
// restarts, OOM kills, crash loops, image pull errors, pods left
// unscheduled or lost with their node, berth's own evictions and requeues,
// and jobs out of retries — to chat and webhooks, with what only berth
// knows: the gang, its queue, flavor, topology domain and booking, how many
// of its pods are affected and how many GPUs sit idle because of it.
//
// The package is split the way the work flows: a Report is built from a
// gang and its failures; an Aggregator folds the failures of one gang and
// kind inside a dedup window into one Report; each policy's rate bounds
// what its sink receives, and the namespaces the policy selects take that
// rate in turns, so one namespace's flood does not crowd out another's
// reports; a Dispatcher delivers Reports to sinks from bounded queues, one
// per namespace served in turn, retrying with backoff, skipping a sink that
// keeps failing, and dropping (and counting) what does not fit, so a slow
// or failing sink never holds up admission or another tenant's reports.
// Tenants choose their sinks' URLs, so Egress decides where berth connects
// (no redirects, no internal addresses, Slack only on Slack's hosts),
// SlackMessage escapes what tenants wrote, and a Redactor blanks what looks
// like a secret.
package notify

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Kind is what went wrong.
type Kind string

// The kinds of failure reported.
const (
	// Restarted: a container of a pod restarted.
	Restarted Kind = "Restarted"
	// OOMKilled: a container was killed for exceeding its memory limit.
	OOMKilled Kind = "OOMKilled"
	// CrashLoopBackOff: a container keeps crashing and the kubelet backs off.
	CrashLoopBackOff Kind = "CrashLoopBackOff"
	// ImagePullBackOff: a container's image cannot be pulled.
	ImagePullBackOff Kind = "ImagePullBackOff"
	// Unschedulable: a pod is still not bound a while after admission.
	Unschedulable Kind = "Unschedulable"
	// NodeLost: a pod was lost with its node.
	NodeLost Kind = "NodeLost"
	// Evicted: berth evicted the gang (preempted, capacity revoked, pods
	// not ready, booking failed).
	Evicted Kind = "Evicted"
	// Requeued: berth put the gang back in its queue.
	Requeued Kind = "Requeued"
	// RetriesExhausted: the job will not be retried any more.
	RetriesExhausted Kind = "RetriesExhausted"
	// BookingFailed: capacity booked for the gang was not provisioned;
	// berth released its quota and tries again later, or gave up.
	BookingFailed Kind = "BookingFailed"
)

// verbs say what happened to a pod of each kind, for the headline.
var verbs = map[Kind]string{
	Restarted: "restarted", OOMKilled: "were OOM-killed", CrashLoopBackOff: "are crash-looping",
	ImagePullBackOff: "cannot pull their image", Unschedulable: "are not scheduled", NodeLost: "were lost with their node",
	Evicted: "were evicted", Requeued: "were requeued", RetriesExhausted: "ran out of retries",
	BookingFailed: "could not book their capacity",
}

// Gang is what berth knows of the gang a failure belongs to.
type Gang struct {
	// UID identifies the gang (its Workload) for deduplication.
	UID types.UID
	// JobKind and JobName name the job, e.g. "Job" and "train-x";
	// JobAPIVersion and JobUID complete its reference, for events on it.
	JobKind, JobName      string
	JobAPIVersion, JobUID string
	Namespace             string
	// LocalQueue and ClusterQueue it was admitted through, and the flavor.
	LocalQueue, ClusterQueue, Flavor string
	// Domain is the topology domain it was placed in ("" when none).
	Domain string
	// Booking is the ProvisioningRequest that booked its capacity ("" when
	// it runs on existing capacity).
	Booking string
	// Pods is the size of the gang; GPUsPerPod what each pod holds.
	Pods       int
	GPUsPerPod int64
}

// Failure is one pod's failure (or the gang's, for berth's own actions).
type Failure struct {
	Kind Kind
	// Pod and Node are empty for a failure of the gang as a whole.
	Pod, Node, Container string
	// Reason and Message are the last termination's, the waiting state's,
	// the scheduler's or berth's.
	Reason, Message string
	// ExitCode and Signal of the last termination (0 when unknown).
	ExitCode, Signal int32
	// Restarts is the container's restart count.
	Restarts int32
	At       time.Time
}

// Report is one message: the failures of one kind in one gang inside one
// dedup window.
type Report struct {
	Gang     Gang
	Kind     Kind
	Failures []Failure
	// Suppressed counts failures folded into this report after the first
	// one of each pod (repeated restarts of the same pod).
	Suppressed int
	// LogTail is the end of the previous container's log of the first
	// failed pod, bounded in lines and bytes ("" when not fetched).
	LogTail string
	// Events are recent events of the first failed pod, "Reason: note".
	Events []string
	// LogLines and LogBytes bound LogTail (the policy's limits; 0 lines:
	// no log).
	LogLines, LogBytes int64
}

// Affected is how many distinct pods the report covers (1 for a failure
// of the whole gang).
func (r *Report) Affected() int {
	pods := map[string]bool{}
	for _, f := range r.Failures {
		pods[f.Pod] = true
	}
	return len(pods)
}

// IdleGPUs is how many GPUs the gang's other pods hold while they wait for
// the failed ones (a gang makes no progress without all its pods), or 0
// for kinds after which the gang no longer holds them.
func (r *Report) IdleGPUs() int64 {
	switch r.Kind {
	case Evicted, Requeued, RetriesExhausted, BookingFailed:
		return 0
	}
	return int64(max(r.Gang.Pods-r.Affected(), 0)) * r.Gang.GPUsPerPod
}

// Headline is the report in one line, e.g. "3 of 8 pods of Job
// team-a/train-x restarted: OOMKilled".
func (r *Report) Headline() string {
	what := fmt.Sprintf("%s %s/%s", r.Gang.JobKind, r.Gang.Namespace, r.Gang.JobName)
	if r.Affected() == 1 && r.Failures[0].Pod == "" {
		verb := strings.TrimPrefix(verbs[r.Kind], "were ")
		if r.Kind == BookingFailed {
			verb = "could not book its capacity"
		}
		return fmt.Sprintf("%s %s: %s", what, verb, r.reasons())
	}
	return fmt.Sprintf("%d of %d pods of %s %s: %s", r.Affected(), r.Gang.Pods, what, verbs[r.Kind], r.reasons())
}

// reasons lists the distinct reasons of the failures, in order of first
// appearance.
func (r *Report) reasons() string {
	var out []string
	seen := map[string]bool{}
	for _, f := range r.Failures {
		if f.Reason != "" && !seen[f.Reason] {
			seen[f.Reason] = true
			out = append(out, f.Reason)
		}
	}
	if len(out) == 0 {
		return string(r.Kind)
	}
	return strings.Join(out, ", ")
}

// Commands are what to run next to look into the report.
func (r *Report) Commands() []string {
	out := []string{fmt.Sprintf("kubectl berth explain %s/%s -n %s", strings.ToLower(r.Gang.JobKind), r.Gang.JobName, r.Gang.Namespace)}
	for _, f := range r.Failures {
		if f.Pod != "" && f.Container != "" {
			out = append(out, fmt.Sprintf("kubectl logs --previous -n %s %s -c %s", r.Gang.Namespace, f.Pod, f.Container))
			break
		}
	}
	return out
}
