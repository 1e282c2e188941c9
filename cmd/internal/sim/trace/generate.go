package trace

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// pcgStream is the PCG stream the generator draws from. It is fixed so
// that a seed alone determines the trace; changing it changes every
// generated trace.
const pcgStream = 0x9e3779b97f4a7c15

// secondsPerDay is the period of the diurnal arrival rate.
const secondsPerDay = 24 * 60 * 60

// maxSampledRunTime caps a run-time sample when a class sets no Max, so
// that a wide sigma cannot overflow a time.Duration.
const maxSampledRunTime = 10 * 365 * 24 * time.Hour

// Generate generates a trace from a mix. It is deterministic: the same
// mix and seed give the same trace, drawn from a PCG generator seeded
// with seed alone (no global random state).
//
// Training jobs arrive as a Poisson process (thinned to follow the
// diurnal rate), each of a class picked by share and a tenant picked by
// weight, with its gang size and run time drawn from the class's
// distributions. Submit times are whole seconds. Training job IDs are
// "<class>-<n>", numbered per class in submission order.
//
// Inference jobs follow each service's rate curve, sampled every step:
// when the needed replicas, ceil(rate / capacityPerReplica), grow, one
// job is submitted per replica added; when they shrink, the most recently
// added replicas end first (last in, first out), and a job's run time is
// the time from its submission until its replica is removed, or until
// the end of the trace. Replica job IDs are "<service>-<n>".
//
// The mix is validated first; its problems are returned together.
func Generate(m Mix, seed uint64) (Trace, error) {
	if err := m.Validate(); err != nil {
		return Trace{}, fmt.Errorf("invalid mix: %w", err)
	}
	if m.GPUResource == "" {
		m.GPUResource = defaultGPUResource
	}
	rng := rand.New(rand.NewPCG(seed, pcgStream))
	jobs, err := generateTraining(m, rng)
	if err != nil {
		return Trace{}, err
	}
	for _, s := range m.Inference {
		replicas, err := generateService(m, s, maxGeneratedJobs-len(jobs))
		if err != nil {
			return Trace{}, err
		}
		jobs = append(jobs, replicas...)
	}
	sortJobs(jobs)
	t := Trace{Jobs: jobs}
	if err := t.Validate(); err != nil {
		// The mix was valid, so this is the generator's fault, not the
		// user's; say so rather than point at the mix.
		return Trace{}, fmt.Errorf("generated trace is invalid (a generator bug): %w", err)
	}
	return t, nil
}

// generateTraining draws the training jobs by thinning a homogeneous
// Poisson process at the peak rate (Lewis and Shedler): each candidate
// is kept with probability rate(t) / peak rate, which gives a Poisson
// process with the diurnal rate without integrating it.
func generateTraining(m Mix, rng *rand.Rand) ([]Job, error) {
	tr := m.Training
	if len(tr.Classes) == 0 {
		return nil, nil
	}
	classWeights := make([]float64, len(tr.Classes))
	for i, c := range tr.Classes {
		classWeights[i] = c.Share
	}
	tenantWeights := make([]float64, len(m.Tenants))
	for i, t := range m.Tenants {
		tenantWeights[i] = t.Weight
	}
	classCum, tenantCum := cumulative(classWeights), cumulative(tenantWeights)
	peak := tr.Arrival.RatePerHour / 3600 * (1 + tr.Arrival.DiurnalAmplitude)
	end := m.Duration.Seconds()
	counts := make([]int, len(tr.Classes))
	var jobs []Job
	for t := rng.ExpFloat64() / peak; t < end; t += rng.ExpFloat64() / peak {
		if rng.Float64()*peak >= tr.Arrival.ratePerSecond(t) {
			continue
		}
		ci, ti := pick(classCum, rng), pick(tenantCum, rng)
		counts[ci]++
		if len(jobs) >= maxGeneratedJobs {
			return nil, fmt.Errorf("the mix generates more than %d training jobs; lower training.arrival.ratePerHour or duration", maxGeneratedJobs)
		}
		submit := time.Duration(math.Floor(t)) * time.Second
		jobs = append(jobs, trainingJob(m, tr.Classes[ci], m.Tenants[ti], counts[ci], submit, rng))
	}
	return jobs, nil
}

// ratePerSecond is the arrival rate at t seconds into the trace.
func (a Arrival) ratePerSecond(t float64) float64 {
	phase := 2 * math.Pi * (t - a.PeakAt.Seconds()) / secondsPerDay
	return a.RatePerHour / 3600 * (1 + a.DiurnalAmplitude*math.Cos(phase))
}

// trainingJob draws the n-th job of class c.
func trainingJob(m Mix, c TrainingClass, tenant Tenant, n int, submit time.Duration, rng *rand.Rand) Job {
	podWeights := make([]float64, len(c.Pods))
	for i, ch := range c.Pods {
		podWeights[i] = ch.Weight
	}
	pods := c.Pods[pick(cumulative(podWeights), rng)].Value
	return Job{
		ID:           fmt.Sprintf("%s-%05d", c.Name, n),
		Submit:       submit,
		Namespace:    tenant.Namespace,
		LocalQueue:   tenant.LocalQueue,
		Kind:         Training,
		Class:        c.Name,
		Priority:     c.Priority,
		Pods:         pods,
		Requests:     podRequests(m.GPUResource, c.GPUsPerPod, c.CPUPerPod, c.MemoryPerPod),
		NodeSelector: maps.Clone(c.NodeSelector), // not shared with the mix
		Topology:     c.Topology,
		RunTime:      c.RunTime.sample(rng),
	}
}

// sample draws a run time: log-normal around the median, clamped to
// [Min, Max], rounded to the second and at least one second so that the
// job is valid whatever the bounds.
func (l LogNormal) sample(rng *rand.Rand) time.Duration {
	s := l.Median.Seconds() * math.Exp(l.Sigma*rng.NormFloat64())
	upper := maxSampledRunTime.Seconds()
	if l.Max.Duration > 0 {
		upper = l.Max.Seconds()
	}
	s = max(min(s, upper), l.Min.Seconds())
	d := time.Duration(math.Round(s)) * time.Second
	return max(d, time.Second)
}

// replica is a running replica of a service.
type replica struct {
	id     string
	submit time.Duration
}

// generateService emits a job per replica of s over the trace, at most
// limit of them.
func generateService(m Mix, s Service, limit int) ([]Job, error) {
	step, end := s.Rate.stepOrDefault(), m.Duration.Duration
	var (
		active []replica // a stack: scale-in pops the newest
		jobs   []Job
		n      int
	)
	retire := func(at time.Duration) error {
		r := active[len(active)-1]
		active = active[:len(active)-1]
		if len(jobs) >= limit {
			return fmt.Errorf("inference service %s generates more than %d jobs in all; lengthen rate.step or widen capacityPerReplica", s.Name, maxGeneratedJobs)
		}
		jobs = append(jobs, replicaJob(m, s, r, at-r.submit))
		return nil
	}
	for t := time.Duration(0); t < end; t += step {
		need := s.neededReplicas(t)
		for len(active) < need {
			n++
			active = append(active, replica{id: fmt.Sprintf("%s-%05d", s.Name, n), submit: t})
		}
		for len(active) > need {
			if err := retire(t); err != nil {
				return nil, err
			}
		}
	}
	for len(active) > 0 {
		if err := retire(end); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// neededReplicas is ceil(rate / capacity) at t. A hair is taken off the
// quotient so that a rate exactly at a multiple of the capacity, computed
// with rounding error, does not need one replica more.
func (s Service) neededReplicas(t time.Duration) int {
	need := math.Ceil(s.Rate.at(t)/s.CapacityPerReplica - 1e-9)
	return int(max(need, 0))
}

// replicaJob is the job of one replica that ran for runTime.
func replicaJob(m Mix, s Service, r replica, runTime time.Duration) Job {
	return Job{
		ID:         r.id,
		Submit:     r.submit,
		Namespace:  s.Namespace,
		LocalQueue: s.LocalQueue,
		Kind:       Inference,
		Class:      s.Name,
		Priority:   s.Priority,
		Pods:       s.PodsPerReplica,
		Requests:   podRequests(m.GPUResource, s.GPUsPerPod, s.CPUPerPod, s.MemoryPerPod),
		Topology:   s.Topology,
		RunTime:    runTime,
		SLO:        s.SLO.Duration,
	}
}

// stepOrDefault is the curve's step, one minute when unset.
func (r RateCurve) stepOrDefault() time.Duration {
	if r.Step.Duration == 0 {
		return defaultStep
	}
	return r.Step.Duration
}

// at is the request rate at t: the highest of the base and each burst.
func (r RateCurve) at(t time.Duration) float64 {
	rate := r.Base
	for _, b := range r.Bursts {
		rate = max(rate, b.at(t, r.Base))
	}
	return rate
}

// at is the burst's rate at t over the curve's base.
func (b Burst) at(t time.Duration, base float64) float64 {
	fall := b.Rise.Duration
	if b.Fall != nil {
		fall = b.Fall.Duration
	}
	riseEnd := b.At.Duration + b.Rise.Duration
	holdEnd := riseEnd + b.Hold.Duration
	switch {
	case t < b.At.Duration:
		return base
	case t < riseEnd:
		return base + (b.Peak-base)*float64(t-b.At.Duration)/float64(b.Rise.Duration)
	case t < holdEnd:
		return b.Peak
	case t < holdEnd+fall:
		return b.Peak - (b.Peak-base)*float64(t-holdEnd)/float64(fall)
	}
	return base
}

// podRequests is a pod's requests, leaving out the zero ones.
func podRequests(gpu string, gpus int32, cpu, memory resource.Quantity) corev1.ResourceList {
	reqs := corev1.ResourceList{}
	if gpus > 0 {
		reqs[corev1.ResourceName(gpu)] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	if !cpu.IsZero() {
		reqs[corev1.ResourceCPU] = cpu.DeepCopy()
	}
	if !memory.IsZero() {
		reqs[corev1.ResourceMemory] = memory.DeepCopy()
	}
	return reqs
}

// cumulative turns weights into running totals for pick.
func cumulative(weights []float64) []float64 {
	cum := make([]float64, len(weights))
	total := 0.0
	for i, w := range weights {
		total += w
		cum[i] = total
	}
	return cum
}

// pick draws an index with probability proportional to its weight, from
// the running totals of the weights.
func pick(cum []float64, rng *rand.Rand) int {
	x := rng.Float64() * cum[len(cum)-1]
	i := sort.Search(len(cum), func(i int) bool { return cum[i] > x })
	return min(i, len(cum)-1)
}
