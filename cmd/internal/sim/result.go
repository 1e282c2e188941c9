package sim

import (
	"time"

	"github.com/berth-dev/berth/cmd/internal/sim/plot"
)

// PolicyResult is what one policy did with the trace.
type PolicyResult struct {
	// Policy is the policy's name.
	Policy string `json:"policy"`
	// End is when the run ended: once every job ended and the autoscaler
	// had time to remove the nodes left empty, or Model.Drain after the
	// last submission.
	End Duration `json:"end"`
	// Jobs in the trace; Started ran at least once, GaveUp were given up
	// by berth's booking retries, NeverStarted neither by the end.
	Jobs         int `json:"jobs"`
	Started      int `json:"started"`
	GaveUp       int `json:"gaveUp"`
	NeverStarted int `json:"neverStarted"`
	// Evictions of gangs that had pods: preempted, or evicted when their
	// booking failed or their pods were not Ready in time.
	Evictions int `json:"evictions"`
	// StartTimes are the times from submission to the whole gang
	// running, per class.
	StartTimes []StartTimes `json:"startTimes"`
	// GPUHours sorts the GPUs' time.
	GPUHours GPUHours `json:"gpuHours"`
	// NodeHours is the nodes' time from the autoscaler's request to their
	// removal: what the cluster cost.
	NodeHours float64 `json:"nodeHours"`
	// ScaleUps sorts the nodes created by whether their job ran there.
	ScaleUps scaleUpCounts `json:"scaleUps"`
	// SLO is the start-up SLO attainment of the jobs that have one.
	SLO SLO `json:"slo"`
	// Tenants is each ClusterQueue's share of the GPUs held, against its
	// weight's share among the ClusterQueues with work, both averaged over
	// the samples in which any GPU was held (0 while it had no work), so
	// that each sums to 1 over the ClusterQueues.
	Tenants []TenantShare `json:"tenants"`
	// Timeline is each job's first admission and first start, in trace
	// order, when Options.Timeline asks for it.
	Timeline []JobTimes `json:"timeline,omitempty"`

	// Usage is the GPU time series, for the plots.
	Usage  plot.Usage `json:"-"`
	starts map[string][]time.Duration
	shares []plot.Series
}

// StartTimes are the percentiles of one class's times to start.
type StartTimes struct {
	Class string   `json:"class"`
	Jobs  int      `json:"jobs"`
	P50   Duration `json:"p50"`
	P95   Duration `json:"p95"`
	P99   Duration `json:"p99"`
}

// JobTimes is when one job was submitted, first admitted (its quota
// reserved; without a queue, its pods created) and first ran whole, from
// the start of the trace. A job never admitted or never started has no
// Admitted or Started.
type JobTimes struct {
	ID       string    `json:"id"`
	Submit   Duration  `json:"submit"`
	Admitted *Duration `json:"admitted,omitempty"`
	Started  *Duration `json:"started,omitempty"`
}

// GPUHours sorts GPU time: Busy in gangs that run whole, Partial held by
// gangs not all of whose pods run, Idle on ready nodes, and of that
// IdleWhileWaiting while gangs that could use it waited.
type GPUHours struct {
	Busy             float64 `json:"busy"`
	Partial          float64 `json:"partial"`
	Idle             float64 `json:"idle"`
	IdleWhileWaiting float64 `json:"idleWhileWaiting"`
}

// SLO counts the jobs with a start-up SLO and those that met it.
type SLO struct {
	Jobs       int     `json:"jobs"`
	Met        int     `json:"met"`
	Attainment float64 `json:"attainment"`
	// Classes are the same counts per class of the jobs with an SLO, by
	// class name: services of one trace can meet it very differently (a
	// rack-bound replica needs a whole rack's room where a one-GPU replica
	// fits any node), and the total hides which one missed.
	Classes []ClassSLO `json:"classes,omitempty"`
}

// ClassSLO is one class's start-up SLO attainment. A job that never
// started counts as missing its SLO.
type ClassSLO struct {
	Class      string  `json:"class"`
	Jobs       int     `json:"jobs"`
	Met        int     `json:"met"`
	Attainment float64 `json:"attainment"`
}

// TenantShare is a ClusterQueue's share of the GPUs held.
type TenantShare struct {
	ClusterQueue  string  `json:"clusterQueue"`
	Weight        float64 `json:"weight"`
	MeanShare     float64 `json:"meanShare"`
	EntitledShare float64 `json:"entitledShare"`
}

// Starts are the times to start of the jobs that started, per class.
func (r PolicyResult) Starts() map[string][]time.Duration { return r.starts }

// Shares are the per-tenant share series.
func (r PolicyResult) Shares() []plot.Series { return r.shares }
