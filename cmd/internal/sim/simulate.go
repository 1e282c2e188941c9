// Package sim is berth's coordination simulator: it replays a workload
// trace against a model of a cluster — node groups that grow through a
// cluster-autoscaler model, pods bound by a kube-scheduler model — in
// virtual time and in one process, under several policies side by side,
// and measures what each costs: GPUs idle while gangs wait, GPUs held by
// partial gangs, nodes created that their job could not use, time to
// start, SLO attainment, node-hours and tenants' shares.
//
// The berth policy runs berth's own admission engine (admission) through
// the controller's own translations and Workload lifecycle: what it
// measures is what the controller decides. docs/coordination.md describes
// the model and its sources.
package sim

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// The policies a simulation compares.
const (
	// Uncoordinated has no queue: each job's pods are created at
	// submission, bound one by one where they fit, and the autoscaler
	// scales for pending pods, unaware of gangs and topology.
	Uncoordinated = "uncoordinated"
	// QuotaOnly admits by quota and fair share, then books unpinned
	// capacity for each admission and places the pods after it (Kueue's
	// ProvisioningRequest admission check).
	QuotaOnly = "quota-only"
	// Berth is berth's engine with pinned bookings.
	Berth = "berth"
)

// Policies are every policy, in the order reports show them.
func Policies() []string { return []string{Uncoordinated, QuotaOnly, Berth} }

// Options configure a simulation.
type Options struct {
	// Policies to compare; empty means all.
	Policies []string
	// GPUResource is the resource the measures count; default nvidia.com/gpu.
	GPUResource corev1.ResourceName
	// Seed draws the nodes' boot latencies; the same seed, scenario and
	// trace give the same report.
	Seed uint64
	// Log, when set, hears every decision of every run, one line each.
	Log io.Writer
	// Timeline, when set, puts each job's admission and start in the
	// results (PolicyResult.Timeline): what the fidelity check compares
	// with a run on a real cluster.
	Timeline bool
}

// Report is what a simulation found, one result per policy.
type Report struct {
	// Jobs is how many jobs of the trace were run, LeftOut those left out
	// because they can never fit the modelled cluster.
	Jobs    int            `json:"jobs"`
	LeftOut LeftOut        `json:"leftOut"`
	Results []PolicyResult `json:"results"`
}

// Simulate runs tr on sc under each policy of opts and reports the
// measures. An invalid scenario or trace is an error saying what to fix;
// nothing is run then.
func Simulate(sc Scenario, tr trace.Trace, opts Options) (Report, error) {
	if len(opts.Policies) == 0 {
		opts.Policies = Policies()
	}
	if opts.GPUResource == "" {
		opts.GPUResource = "nvidia.com/gpu"
	}
	if err := check(sc, tr, opts); err != nil {
		return Report{}, err
	}
	tr, left := splitNeverFits(sc, tr, opts.GPUResource)
	if len(tr.Jobs) == 0 {
		return Report{}, fmt.Errorf("none of the trace's %d jobs can ever fit the modelled cluster, even with every node group at maxNodes "+
			"(the largest, %s, asks for %d pods and %d GPUs): raise the CapacityPools' maxNodes or import with larger --gpus-per-node",
			left.Jobs, left.Largest, left.LargestPods, left.LargestGPUs)
	}
	rep := Report{Jobs: len(tr.Jobs), LeftOut: left, Results: make([]PolicyResult, len(opts.Policies))}
	errs := make([]error, len(opts.Policies))
	runOne := func(i int) {
		name := opts.Policies[i]
		r := newRun(sc, tr, opts.GPUResource, opts.Seed)
		r.log, r.timeline = opts.Log, opts.Timeline
		r.logf(0, "policy %s", name)
		if errs[i] = r.use(name); errs[i] == nil {
			rep.Results[i], errs[i] = r.simulate(name)
		}
	}
	// The runs share nothing but the inputs, which they only read: they run
	// side by side, one per core, unless they write one log.
	workers := runtime.GOMAXPROCS(0)
	if opts.Log != nil {
		workers = 1
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(workers, len(opts.Policies)) {
		wg.Go(func() {
			for i := range next {
				runOne(i)
			}
		})
	}
	// Longest first: berth's run takes about as long as the other two
	// together, so starting it first keeps both cores busy to the end.
	for _, i := range longestFirst(opts.Policies) {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Report{}, err
	}
	return rep, nil
}

// longestFirst orders the indices of policies by how long their runs
// take, longest first (berth, quota-only, uncoordinated; measured in
// docs/performance.md).
func longestFirst(policies []string) []int {
	cost := map[string]int{Berth: 3, QuotaOnly: 2, Uncoordinated: 1}
	order := make([]int, len(policies))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cost[policies[b]] - cost[policies[a]] })
	return order
}

// check reports what in the options, the scenario or the trace keeps the
// simulation from running.
func check(sc Scenario, tr trace.Trace, opts Options) error {
	errs := []error{CheckPolicies(opts.Policies)}
	if err := sc.Validate(); err != nil {
		errs = append(errs, err)
	}
	// The trace's caps (pods per job, jobs, pods in all) are checked here
	// too, for a trace built in code: a run allocates every pod.
	if err := tr.Validate(); err != nil {
		return errors.Join(append(errs, fmt.Errorf("the trace: %w", err))...)
	}
	lqs := map[types.NamespacedName]bool{}
	for _, lq := range sc.LocalQueues {
		lqs[types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name}] = true
	}
	missing := 0
	for _, j := range tr.Jobs {
		if !lqs[types.NamespacedName{Namespace: j.Namespace, Name: j.LocalQueue}] {
			if missing++; missing <= 5 {
				errs = append(errs, fmt.Errorf("job %s: LocalQueue %s/%s is not in the scenario", j.ID, j.Namespace, j.LocalQueue))
			}
		}
	}
	if missing > 5 {
		errs = append(errs, fmt.Errorf("%d more jobs name LocalQueues that are not in the scenario", missing-5))
	}
	if len(tr.Jobs) == 0 {
		errs = append(errs, errors.New("the trace has no job"))
	}
	if n := distinctResources(sc, tr); n > maxResources {
		errs = append(errs, fmt.Errorf("the scenario and the trace name %d resources; the simulator models at most %d", n, maxResources))
	}
	return errors.Join(errs...)
}

// CheckPolicies says which of names is not a policy.
func CheckPolicies(names []string) error {
	var errs []error
	for _, p := range names {
		if !slices.Contains(Policies(), p) {
			errs = append(errs, fmt.Errorf("policy %q: use %v", p, Policies()))
		}
	}
	return errors.Join(errs...)
}

// distinctResources counts the resources the pools offer and the jobs ask for.
func distinctResources(sc Scenario, tr trace.Trace) int {
	seen := map[corev1.ResourceName]bool{}
	for _, p := range sc.Pools {
		for r := range p.Spec.NodeTemplate.Allocatable {
			seen[r] = true
		}
	}
	for _, j := range tr.Jobs {
		for r := range j.Requests {
			seen[r] = true
		}
	}
	return len(seen)
}

// use sets the run's policy.
func (r *run) use(name string) error {
	switch name {
	case Uncoordinated:
		r.pol = &uncoordinated{r: r}
	case QuotaOnly, Berth:
		s, err := newEngineShell(r, name == QuotaOnly)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.pol = s
	default:
		return fmt.Errorf("policy %q: use %v", name, Policies())
	}
	return nil
}

// tenant is the ClusterQueue j's LocalQueue points at.
func (r *run) tenant(j *job) string {
	if r.tenants == nil {
		r.tenants = map[types.NamespacedName]string{}
		for _, lq := range r.sc.LocalQueues {
			r.tenants[types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name}] = lq.Spec.ClusterQueue
		}
	}
	return r.tenants[types.NamespacedName{Namespace: j.spec.Namespace, Name: j.spec.LocalQueue}]
}

// weight is a ClusterQueue's fair-sharing weight (1 when unset).
func (r *run) weight(cq string) float64 {
	for _, q := range r.sc.ClusterQueues {
		if q.Name == cq && q.Spec.FairSharing.Weight != nil {
			return q.Spec.FairSharing.Weight.AsApproximateFloat64()
		}
	}
	return 1
}

// uncoordinated has no queue: pods are created at submission.
type uncoordinated struct{ r *run }

func (u *uncoordinated) submit(j *job, now time.Duration) {
	together := ""
	if j.spec.Topology.Mode == trace.Required {
		together = j.spec.Topology.Level
	}
	u.r.admitted(j, now)
	u.r.createPods(j, j.spec.NodeSelector, together, "", now)
}

func (u *uncoordinated) settle(time.Duration) bool    { return false }
func (u *uncoordinated) started(*job, time.Duration)  {}
func (u *uncoordinated) finished(*job, time.Duration) {}
