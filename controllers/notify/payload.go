package notify

import "time"

// PayloadVersion identifies the JSON layout of Payload; it changes only
// with a new version.
const PayloadVersion = "notify.berth.dev/v1alpha1"

// Payload is what the generic webhook sink posts: the report, flattened
// for consumers in any language.
type Payload struct {
	Version  string        `json:"version"`
	Kind     Kind          `json:"kind"`
	Headline string        `json:"headline"`
	Job      PayloadJob    `json:"job"`
	Affected int           `json:"affectedPods"`
	IdleGPUs int64         `json:"idleGPUs"`
	Failures []PayloadFail `json:"failures"`
	// Suppressed counts repeats folded into this report.
	Suppressed int      `json:"suppressed,omitempty"`
	LogTail    string   `json:"logTail,omitempty"`
	Events     []string `json:"events,omitempty"`
	Commands   []string `json:"commands"`
}

// PayloadJob is the gang and where it runs.
type PayloadJob struct {
	Kind         string `json:"kind"`
	Name         string `json:"name"`
	Namespace    string `json:"namespace"`
	LocalQueue   string `json:"localQueue"`
	ClusterQueue string `json:"clusterQueue"`
	Flavor       string `json:"flavor,omitempty"`
	Domain       string `json:"domain,omitempty"`
	Booking      string `json:"booking,omitempty"`
	Pods         int    `json:"pods"`
	GPUsPerPod   int64  `json:"gpusPerPod"`
}

// PayloadFail is one failure.
type PayloadFail struct {
	Pod       string    `json:"pod,omitempty"`
	Node      string    `json:"node,omitempty"`
	Container string    `json:"container,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	ExitCode  int32     `json:"exitCode,omitempty"`
	Signal    int32     `json:"signal,omitempty"`
	Restarts  int32     `json:"restarts,omitempty"`
	At        time.Time `json:"at"`
}

// NewPayload flattens a report.
func NewPayload(r *Report) Payload {
	g := r.Gang
	p := Payload{
		Version: PayloadVersion, Kind: r.Kind, Headline: r.Headline(), Affected: r.Affected(), IdleGPUs: r.IdleGPUs(),
		Suppressed: r.Suppressed, LogTail: r.LogTail, Events: r.Events, Commands: r.Commands(),
		Job: PayloadJob{Kind: g.JobKind, Name: g.JobName, Namespace: g.Namespace, LocalQueue: g.LocalQueue, ClusterQueue: g.ClusterQueue,
			Flavor: g.Flavor, Domain: g.Domain, Booking: g.Booking, Pods: g.Pods, GPUsPerPod: g.GPUsPerPod},
	}
	for _, f := range r.Failures {
		p.Failures = append(p.Failures, PayloadFail{Pod: f.Pod, Node: f.Node, Container: f.Container, Reason: f.Reason,
			Message: f.Message, ExitCode: f.ExitCode, Signal: f.Signal, Restarts: f.Restarts, At: f.At})
	}
	return p
}
