package trace

import (
	"fmt"
	"io"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// Limits that keep a mistyped mix (a rate per second written as per hour,
// a step of 1ms) from exhausting memory instead of failing clearly.
const (
	// maxGeneratedJobs bounds the jobs one mix may generate.
	maxGeneratedJobs = 1_000_000
	// maxServiceSteps bounds the rate-curve steps of one service.
	maxServiceSteps = 1_000_000
	// maxReplicas bounds the replicas one service may need at once.
	maxReplicas = 100_000
)

// defaultGPUResource is the GPU resource name when a mix or an import
// does not name one.
const defaultGPUResource = "nvidia.com/gpu"

// defaultStep is a service's rate-curve step when its mix gives none.
const defaultStep = time.Minute

// Mix describes a synthetic workload for Generate: training gangs that
// arrive as a Poisson process and inference services that add and remove
// replicas as their request rate changes. It reads from YAML with
// ReadMix; durations are written as Go duration strings ("90s", "24h").
type Mix struct {
	// Duration is the length of the trace: no job is submitted after it,
	// and inference replicas still needed at its end run until it.
	Duration Duration `json:"duration"`
	// GPUResource is the resource GPUs are requested as; "" is
	// nvidia.com/gpu.
	GPUResource string `json:"gpuResource,omitempty"`
	// Tenants submit the training jobs, each a share of them by weight.
	Tenants []Tenant `json:"tenants,omitempty"`
	// Training is the training workload; no classes means none.
	Training TrainingMix `json:"training,omitzero"`
	// Inference is the inference services.
	Inference []Service `json:"inference,omitempty"`
}

// Tenant is a submitter of training jobs.
type Tenant struct {
	// Namespace is the tenant's namespace.
	Namespace string `json:"namespace"`
	// LocalQueue is the tenant's LocalQueue in Namespace.
	LocalQueue string `json:"localQueue"`
	// Weight is the tenant's share of the training submissions, relative
	// to the other tenants' weights (> 0).
	Weight float64 `json:"weight"`
}

// TrainingMix is the training part of a Mix.
type TrainingMix struct {
	// Arrival is when training jobs are submitted.
	Arrival Arrival `json:"arrival"`
	// Classes are the kinds of training job; each submission is one
	// class, picked by Share.
	Classes []TrainingClass `json:"classes,omitempty"`
}

// Arrival is a Poisson arrival process, optionally diurnal: the rate at
// time t is RatePerHour × (1 + DiurnalAmplitude × cos(2π(t − PeakAt)/24h)).
type Arrival struct {
	// RatePerHour is the mean number of submissions per hour (> 0).
	RatePerHour float64 `json:"ratePerHour"`
	// DiurnalAmplitude in [0, 1] is how far the rate swings around its
	// mean over a day; 0 is a constant rate, 1 falls to zero at night.
	DiurnalAmplitude float64 `json:"diurnalAmplitude,omitempty"`
	// PeakAt in [0, 24h) is when, counted from the trace's start, the
	// daily rate peaks.
	PeakAt Duration `json:"peakAt,omitzero"`
}

// TrainingClass is one kind of training job.
type TrainingClass struct {
	// Name is the jobs' class and the prefix of their IDs; unique among
	// the classes and services.
	Name string `json:"name"`
	// Share is the class's share of the submissions, relative to the
	// other classes' shares (> 0).
	Share float64 `json:"share"`
	// Pods is the distribution of the gang's size.
	Pods []Choice `json:"pods"`
	// GPUsPerPod is each pod's GPU request (≥ 0).
	GPUsPerPod int32 `json:"gpusPerPod"`
	// CPUPerPod is each pod's CPU request; zero requests none.
	CPUPerPod resource.Quantity `json:"cpuPerPod,omitzero"`
	// MemoryPerPod is each pod's memory request; zero requests none.
	MemoryPerPod resource.Quantity `json:"memoryPerPod,omitzero"`
	// RunTime is the distribution of the jobs' run time.
	RunTime LogNormal `json:"runTime"`
	// Topology is the jobs' topology request.
	Topology Topology `json:"topology,omitzero"`
	// Priority is the jobs' priority.
	Priority int32 `json:"priority,omitempty"`
	// NodeSelector narrows the nodes the jobs' pods may use.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// Choice is one value of a discrete distribution.
type Choice struct {
	// Value is the value chosen.
	Value int32 `json:"value"`
	// Weight is its probability relative to the other choices' (> 0).
	Weight float64 `json:"weight"`
}

// LogNormal is a log-normal distribution of durations, clamped: a sample
// is Median × e^(Sigma × N(0,1)), then limited to [Min, Max] and rounded
// to the second (at least one second).
type LogNormal struct {
	// Median is the distribution's median (> 0).
	Median Duration `json:"median"`
	// Sigma is the standard deviation of the duration's logarithm (≥ 0);
	// 0 makes every sample the median.
	Sigma float64 `json:"sigma"`
	// Min is the shortest sample.
	Min Duration `json:"min,omitzero"`
	// Max is the longest sample; zero is no limit.
	Max Duration `json:"max,omitzero"`
}

// Service is an inference service. Its replicas are gangs of
// PodsPerReplica pods; it needs ceil(rate / CapacityPerReplica) of them.
type Service struct {
	// Name is the replicas' class and the prefix of their IDs; unique
	// among the classes and services.
	Name string `json:"name"`
	// Namespace is the service's namespace.
	Namespace string `json:"namespace"`
	// LocalQueue is the service's LocalQueue in Namespace.
	LocalQueue string `json:"localQueue"`
	// PodsPerReplica is each replica's gang size, 1 to 4.
	PodsPerReplica int32 `json:"podsPerReplica"`
	// GPUsPerPod is each pod's GPU request (≥ 0).
	GPUsPerPod int32 `json:"gpusPerPod"`
	// CPUPerPod is each pod's CPU request; zero requests none.
	CPUPerPod resource.Quantity `json:"cpuPerPod,omitzero"`
	// MemoryPerPod is each pod's memory request; zero requests none.
	MemoryPerPod resource.Quantity `json:"memoryPerPod,omitzero"`
	// CapacityPerReplica is the requests per second one replica serves
	// (> 0).
	CapacityPerReplica float64 `json:"capacityPerReplica"`
	// SLO bounds each replica's time from submission to start; 0: none.
	SLO Duration `json:"slo,omitzero"`
	// Priority is the replicas' priority.
	Priority int32 `json:"priority,omitempty"`
	// Topology is each replica's topology request.
	Topology Topology `json:"topology,omitzero"`
	// Rate is the service's request rate over the trace.
	Rate RateCurve `json:"rate"`
}

// RateCurve is a request rate over time: Base, raised by bursts (where
// bursts overlap, the higher wins), sampled every Step.
type RateCurve struct {
	// Base is the rate outside bursts, in requests per second (≥ 0).
	Base float64 `json:"base"`
	// Bursts raise the rate for a while.
	Bursts []Burst `json:"bursts,omitempty"`
	// Step is how often the needed replicas are recomputed; zero is one
	// minute.
	Step Duration `json:"step,omitzero"`
}

// Burst raises a rate from the curve's base to Peak linearly over Rise
// from At, holds it for Hold, then lowers it back over Fall.
type Burst struct {
	// At is when the burst starts, from the trace's start.
	At Duration `json:"at"`
	// Rise is how long the rate takes to reach Peak; 0 jumps.
	Rise Duration `json:"rise,omitzero"`
	// Hold is how long the rate stays at Peak.
	Hold Duration `json:"hold"`
	// Fall is how long the rate takes to return to base; nil falls as
	// fast as it rose, 0 drops at once.
	Fall *Duration `json:"fall,omitempty"`
	// Peak is the rate at the burst's height, in requests per second
	// (≥ the curve's base).
	Peak float64 `json:"peak"`
}

// ReadMix reads a Mix from YAML (or JSON) and validates it. Unknown
// fields are an error, so that a misspelt field does not silently take
// its default.
func ReadMix(r io.Reader) (Mix, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Mix{}, fmt.Errorf("reading mix: %w", err)
	}
	var m Mix
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return Mix{}, fmt.Errorf("reading mix: %w", plainDecodeError(err))
	}
	if err := m.Validate(); err != nil {
		return Mix{}, fmt.Errorf("reading mix: %w", err)
	}
	return m, nil
}

// Validate reports every problem of the mix (up to 20), each naming the
// field to fix by its YAML path, e.g. training.classes[1].pods[0].weight.
func (m Mix) Validate() error {
	var p problems
	if m.Duration.Duration <= 0 {
		p.addf("duration must be positive, got %v", m.Duration)
	}
	if len(m.Training.Classes) == 0 && len(m.Inference) == 0 {
		p.addf("the mix has no training classes and no inference services; it would generate no jobs")
	}
	if len(m.Training.Classes) > 0 {
		validateTenants(&p, m.Tenants)
		validateArrival(&p, m.Training.Arrival, m.Duration.Duration)
	}
	names := make(map[string]string)
	claim := func(name, at string) {
		if name == "" {
			return
		}
		if first, dup := names[name]; dup {
			p.addf("%s.name %q is already used by %s; names must be unique as they prefix job IDs", at, name, first)
			return
		}
		names[name] = at
	}
	for i, c := range m.Training.Classes {
		at := fmt.Sprintf("training.classes[%d]", i)
		validateClass(&p, at, c)
		claim(c.Name, at)
	}
	for i, s := range m.Inference {
		at := fmt.Sprintf("inference[%d]", i)
		validateService(&p, at, s, m.Duration.Duration)
		claim(s.Name, at)
	}
	return p.err()
}

func validateTenants(p *problems, tenants []Tenant) {
	if len(tenants) == 0 {
		p.addf("tenants must list at least one tenant to submit the training jobs")
	}
	for i, t := range tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		if t.Namespace == "" {
			p.addf("%s.namespace must not be empty", at)
		}
		if t.LocalQueue == "" {
			p.addf("%s.localQueue must not be empty", at)
		}
		if !positive(t.Weight) {
			p.addf("%s.weight must be positive, got %v", at, t.Weight)
		}
	}
}

func validateArrival(p *problems, a Arrival, length time.Duration) {
	if !positive(a.RatePerHour) {
		p.addf("training.arrival.ratePerHour must be positive, got %v", a.RatePerHour)
	} else if n := a.RatePerHour * length.Hours(); n > maxGeneratedJobs {
		p.addf("training.arrival.ratePerHour %v over %v gives about %.0f jobs; at most %d are supported", a.RatePerHour, length, n, maxGeneratedJobs)
	}
	if !(a.DiurnalAmplitude >= 0 && a.DiurnalAmplitude <= 1) {
		p.addf("training.arrival.diurnalAmplitude must be in [0, 1], got %v", a.DiurnalAmplitude)
	}
	if a.PeakAt.Duration < 0 || a.PeakAt.Duration >= 24*time.Hour {
		p.addf("training.arrival.peakAt must be in [0, 24h), got %v", a.PeakAt)
	}
}

func validateClass(p *problems, at string, c TrainingClass) {
	if c.Name == "" {
		p.addf("%s.name must not be empty", at)
	}
	if !positive(c.Share) {
		p.addf("%s.share must be positive, got %v", at, c.Share)
	}
	if len(c.Pods) == 0 {
		p.addf("%s.pods must list at least one choice, e.g. [{value: 1, weight: 1}]", at)
	}
	for i, ch := range c.Pods {
		if ch.Value < 1 || ch.Value > MaxJobPods {
			p.addf("%s.pods[%d].value must be 1 to %d, got %d", at, i, MaxJobPods, ch.Value)
		}
		if !positive(ch.Weight) {
			p.addf("%s.pods[%d].weight must be positive, got %v", at, i, ch.Weight)
		}
	}
	validatePodResources(p, at, c.GPUsPerPod, c.CPUPerPod, c.MemoryPerPod)
	r := c.RunTime
	if r.Median.Duration <= 0 {
		p.addf("%s.runTime.median must be positive, got %v", at, r.Median)
	}
	if !(r.Sigma >= 0 && !math.IsInf(r.Sigma, 1)) {
		p.addf("%s.runTime.sigma must be a finite number ≥ 0, got %v", at, r.Sigma)
	}
	if r.Min.Duration < 0 {
		p.addf("%s.runTime.min must not be negative, got %v", at, r.Min)
	}
	if r.Max.Duration < 0 || (r.Max.Duration > 0 && r.Max.Duration < r.Min.Duration) {
		p.addf("%s.runTime.max must be 0 (no limit) or at least min %v, got %v", at, r.Min, r.Max)
	}
	for _, msg := range topologyProblems(c.Topology) {
		p.addf("%s: %s", at, msg)
	}
}

// validatePodResources checks a pod's requests: none negative, and at
// least one, since a job must request something to be scheduled.
func validatePodResources(p *problems, at string, gpus int32, cpu, memory resource.Quantity) {
	if gpus < 0 {
		p.addf("%s.gpusPerPod must not be negative, got %d", at, gpus)
	}
	if cpu.Sign() < 0 {
		p.addf("%s.cpuPerPod must not be negative, got %s", at, cpu.String())
	}
	if memory.Sign() < 0 {
		p.addf("%s.memoryPerPod must not be negative, got %s", at, memory.String())
	}
	if gpus <= 0 && cpu.Sign() <= 0 && memory.Sign() <= 0 {
		p.addf("%s must request something: set gpusPerPod, cpuPerPod or memoryPerPod", at)
	}
}

func validateService(p *problems, at string, s Service, length time.Duration) {
	if s.Name == "" {
		p.addf("%s.name must not be empty", at)
	}
	if s.Namespace == "" {
		p.addf("%s.namespace must not be empty", at)
	}
	if s.LocalQueue == "" {
		p.addf("%s.localQueue must not be empty", at)
	}
	if s.PodsPerReplica < 1 || s.PodsPerReplica > 4 {
		p.addf("%s.podsPerReplica must be 1 to 4, got %d", at, s.PodsPerReplica)
	}
	validatePodResources(p, at, s.GPUsPerPod, s.CPUPerPod, s.MemoryPerPod)
	if !positive(s.CapacityPerReplica) {
		p.addf("%s.capacityPerReplica must be positive (requests per second), got %v", at, s.CapacityPerReplica)
	}
	if s.SLO.Duration < 0 {
		p.addf("%s.slo must not be negative, got %v", at, s.SLO)
	}
	for _, msg := range topologyProblems(s.Topology) {
		p.addf("%s: %s", at, msg)
	}
	validateRate(p, at+".rate", s.Rate, length)
	if positive(s.CapacityPerReplica) && nonNegative(s.Rate.Base) {
		peak := s.Rate.Base
		for _, b := range s.Rate.Bursts {
			peak = max(peak, b.Peak)
		}
		if n := math.Ceil(peak / s.CapacityPerReplica); n > maxReplicas {
			p.addf("%s needs %.0f replicas at its peak rate %v; at most %d are supported (is capacityPerReplica in requests per second?)", at, n, peak, maxReplicas)
		}
	}
}

func validateRate(p *problems, at string, r RateCurve, length time.Duration) {
	if !nonNegative(r.Base) {
		p.addf("%s.base must be a finite number ≥ 0 (requests per second), got %v", at, r.Base)
	}
	switch step := r.stepOrDefault(); {
	case step <= 0:
		p.addf("%s.step must be positive, got %v", at, r.Step)
	case length > 0 && length/step > maxServiceSteps:
		p.addf("%s.step %v over %v gives %d steps; at most %d are supported", at, step, length, length/step, maxServiceSteps)
	}
	for i, b := range r.Bursts {
		bat := fmt.Sprintf("%s.bursts[%d]", at, i)
		if b.At.Duration < 0 {
			p.addf("%s.at must not be negative, got %v", bat, b.At)
		}
		if b.Rise.Duration < 0 {
			p.addf("%s.rise must not be negative, got %v", bat, b.Rise)
		}
		if b.Hold.Duration < 0 {
			p.addf("%s.hold must not be negative, got %v", bat, b.Hold)
		}
		if b.Fall != nil && b.Fall.Duration < 0 {
			p.addf("%s.fall must not be negative, got %v", bat, b.Fall.Duration)
		}
		if !(b.Peak >= r.Base && !math.IsInf(b.Peak, 1)) {
			p.addf("%s.peak must be a finite rate at least the base %v, got %v", bat, r.Base, b.Peak)
		}
	}
}

// positive reports whether x is a finite number > 0 (NaN is not).
func positive(x float64) bool {
	return x > 0 && !math.IsInf(x, 1)
}

// nonNegative reports whether x is a finite number ≥ 0 (NaN is not).
func nonNegative(x float64) bool {
	return x >= 0 && !math.IsInf(x, 1)
}
