// Package trace is the simulator's workload trace: the jobs submitted to a
// cluster over time, read from and written to CSV and YAML, generated from
// synthetic mixes, or imported from the public GPU-cluster trace layout.
package trace

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Kind is what a job is.
type Kind string

const (
	// Training is a gang that runs for a known time and then ends.
	Training Kind = "training"
	// Inference is one replica of an inference service: a gang of one to a
	// few pods that must start within its SLO and then serves until its
	// run time ends (the service scales it in).
	Inference Kind = "inference"
)

// TopologyMode mirrors berth's Workload topology modes.
type TopologyMode string

const (
	// Required keeps the gang in one domain of the level.
	Required TopologyMode = "Required"
	// Preferred places it in one domain if one has room.
	Preferred TopologyMode = "Preferred"
)

// Topology is a job's topology request; the zero value asks for none.
type Topology struct {
	// Mode is Required or Preferred; "" asks for none.
	Mode TopologyMode `json:"mode,omitempty"`
	// Level is a node label key, e.g. topology.kubernetes.io/rack.
	Level string `json:"level,omitempty"`
}

// Job is one submission of a trace.
type Job struct {
	// ID is unique in the trace; it names the job's Workload.
	ID string `json:"id"`
	// Submit is when the job is submitted, from the start of the trace.
	Submit time.Duration `json:"submit"`
	// Namespace is the tenant's namespace.
	Namespace string `json:"namespace"`
	// LocalQueue is the LocalQueue the job is submitted to, in Namespace.
	LocalQueue string `json:"localQueue"`
	// Kind is Training or Inference.
	Kind Kind `json:"kind"`
	// Class groups jobs in the report (e.g. small, large, inference); ""
	// means the kind.
	Class string `json:"class,omitempty"`
	// Priority of the job (higher first).
	Priority int32 `json:"priority,omitempty"`
	// Pods is the gang's size (≥ 1).
	Pods int32 `json:"pods"`
	// Requests are per pod.
	Requests corev1.ResourceList `json:"requests"`
	// NodeSelector narrows the nodes the pods may use.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Topology is the gang's topology request.
	Topology Topology `json:"topology,omitzero"`
	// RunTime is how long the job runs once all its pods started.
	RunTime time.Duration `json:"runTime"`
	// SLO bounds the time from submission to start (inference); 0: none.
	SLO time.Duration `json:"slo,omitempty"`
}

// ClassOf is the job's report class.
func (j Job) ClassOf() string {
	if j.Class != "" {
		return j.Class
	}
	return string(j.Kind)
}

// Trace is the jobs of one run, sorted by Submit then ID.
type Trace struct {
	Jobs []Job `json:"jobs"`
}
