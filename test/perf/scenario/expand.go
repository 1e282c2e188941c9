package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterQueue is one ClusterQueue of an expanded scenario.
type ClusterQueue struct {
	// Name of the ClusterQueue; also the name of its namespace.
	Name string
	// Cohort it belongs to.
	Cohort string
	// Group is the index of its group in Scenario.Groups.
	Group int
	// Index is its index in ClusterQueues().
	Index int
}

// Workload is one workload of an expanded scenario.
type Workload struct {
	// Name is unique within the ClusterQueue's namespace:
	// "<class>-<seq>", zero-padded so names sort in arrival order.
	Name string
	// ClusterQueue is the index of its ClusterQueue in ClusterQueues().
	ClusterQueue int
	// Class is the index of its class in Scenario.Classes.
	Class int
	// Seq numbers the workloads of one class in one ClusterQueue from 0.
	Seq int
	// Arrival is when it is created, from the start of the run.
	Arrival time.Duration
}

// ClusterQueues lists the scenario's ClusterQueues, group by group, cohort
// by cohort.
func (s *Scenario) ClusterQueues() []ClusterQueue {
	var out []ClusterQueue
	for gi, g := range s.Groups {
		cw, qw := digits(g.Count), digits(g.ClusterQueues)
		for i := range g.Count {
			cohort := fmt.Sprintf("%s-%0*d", g.Name, cw, i)
			for j := range g.ClusterQueues {
				out = append(out, ClusterQueue{
					Name: fmt.Sprintf("%s-q%0*d", cohort, qw, j), Cohort: cohort, Group: gi, Index: len(out),
				})
			}
		}
	}
	return out
}

// Workloads lists every workload the scenario creates, ordered by arrival,
// then ClusterQueue, class and sequence number.
func (s *Scenario) Workloads() []Workload {
	cqs := s.ClusterQueues()
	out := make([]Workload, 0, s.WorkloadCount())
	for _, cq := range cqs {
		for ci, c := range s.Classes {
			w := digits(c.Count)
			for n := range c.Count {
				out = append(out, Workload{
					Name:         fmt.Sprintf("%s-%0*d", c.Name, w, n),
					ClusterQueue: cq.Index,
					Class:        ci,
					Seq:          n,
					Arrival:      c.Start.Duration + time.Duration(n)*c.Interval.Duration,
				})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Workload) int {
		switch {
		case a.Arrival != b.Arrival:
			return compare(a.Arrival, b.Arrival)
		case a.ClusterQueue != b.ClusterQueue:
			return a.ClusterQueue - b.ClusterQueue
		case a.Class != b.Class:
			return a.Class - b.Class
		default:
			return a.Seq - b.Seq
		}
	})
	return out
}

// GangRequest is what one workload of the class requests in total: the
// per-pod request times the pods of the gang.
func (c *Class) GangRequest() corev1.ResourceList {
	out := corev1.ResourceList{}
	for r, q := range c.Request {
		out[r] = *resource.NewMilliQuantity(q.MilliValue()*int64(c.PodsPerGang), q.Format)
	}
	return out
}

// Validate reports what is wrong with the scenario, all problems at once.
func (s *Scenario) Validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if len(s.Groups) == 0 {
		errs = append(errs, errors.New("cohorts: at least one group is required"))
	}
	if len(s.Classes) == 0 {
		errs = append(errs, errors.New("workloadClasses: at least one class is required"))
	}
	for i := range s.Groups {
		errs = append(errs, s.validateGroup(i)...)
	}
	seen := map[string]bool{}
	for i := range s.Classes {
		c := &s.Classes[i]
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("workloadClasses[%d]: duplicate name %q", i, c.Name))
		}
		seen[c.Name] = true
		errs = append(errs, s.validateClass(i)...)
	}
	if s.Layout != nil {
		l := s.Layout
		if l.Racks < 1 || l.NodesPerRack < 1 || l.GPUsPerNode < 1 {
			errs = append(errs, errors.New("layout: racks, nodesPerRack and gpusPerNode must be positive"))
		}
		if msgs := validation.IsQualifiedName(l.RackLabel); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("layout.rackLabel %q: %v", l.RackLabel, msgs))
		}
	}
	names := map[string]bool{}
	for _, cq := range s.ClusterQueues() {
		if names[cq.Name] {
			errs = append(errs, fmt.Errorf("ClusterQueue name %q is generated twice: give groups distinct names", cq.Name))
		}
		names[cq.Name] = true
		if msgs := validation.IsDNS1123Label(cq.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("ClusterQueue name %q (also its namespace) is not a DNS label: %v", cq.Name, msgs))
		}
	}
	return errors.Join(errs...)
}

func (s *Scenario) validateGroup(i int) []error {
	g := &s.Groups[i]
	var errs []error
	at := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("cohorts[%d] (%s): %s", i, g.Name, fmt.Sprintf(format, args...)))
	}
	if msgs := validation.IsDNS1123Label(g.Name); len(msgs) > 0 {
		at("name: %v", msgs)
	}
	if g.Count < 1 || g.ClusterQueues < 1 {
		at("count and clusterQueues must be at least 1")
	}
	if len(g.Quota) == 0 {
		at("quota: at least one resource is required")
	}
	seen := map[corev1.ResourceName]bool{}
	for _, q := range g.Quota {
		if seen[q.Resource] || q.Resource == "" {
			at("quota: resource %q is empty or listed twice", q.Resource)
		}
		seen[q.Resource] = true
		if q.Nominal.Sign() < 0 || negative(q.BorrowingLimit) || negative(q.LendingLimit) {
			at("quota of %s: quantities must not be negative", q.Resource)
		}
		if q.LendingLimit != nil && q.LendingLimit.Cmp(q.Nominal) > 0 {
			at("quota of %s: lendingLimit exceeds nominal", q.Resource)
		}
	}
	if !slices.Contains([]string{"StrictFIFO", "BestEffortFIFO"}, g.QueueingStrategy) {
		at("queueingStrategy %q: want StrictFIFO or BestEffortFIFO", g.QueueingStrategy)
	}
	p := g.Preemption
	if !slices.Contains([]string{"", "Never", "LowerPriority", "LowerOrNewerEqualPriority"}, p.WithinClusterQueue) {
		at("preemption.withinClusterQueue %q: want Never, LowerPriority or LowerOrNewerEqualPriority", p.WithinClusterQueue)
	}
	if !slices.Contains([]string{"", "Never", "LowerPriority", "Any"}, p.ReclaimWithinCohort) {
		at("preemption.reclaimWithinCohort %q: want Never, LowerPriority or Any", p.ReclaimWithinCohort)
	}
	return errs
}

func (s *Scenario) validateClass(i int) []error {
	c := &s.Classes[i]
	var errs []error
	at := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("workloadClasses[%d] (%s): %s", i, c.Name, fmt.Sprintf(format, args...)))
	}
	if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
		at("name: %v", msgs)
	}
	if c.Count < 1 || c.PodsPerGang < 1 {
		at("count and podsPerGang must be at least 1")
	}
	if c.Interval.Duration < 0 || c.Start.Duration < 0 || c.Runtime.Duration <= 0 {
		at("start and interval must not be negative, runtime must be positive")
	}
	if len(c.Request) == 0 {
		at("request: at least one resource is required")
	}
	for r, q := range c.Request {
		if q.Sign() <= 0 {
			at("request of %s must be positive", r)
		}
	}
	if t := c.Topology; t != nil && (t.Level == "" || (t.Mode != TopologyRequired && t.Mode != TopologyPreferred)) {
		at("topology: level is required and mode must be %s or %s", TopologyRequired, TopologyPreferred)
	}
	gang := c.GangRequest()
	for gi := range s.Groups {
		g := &s.Groups[gi]
		for r, q := range gang {
			limit, ok := maxUsable(g, r)
			switch {
			case !ok:
				at("requests %s, which cohorts[%d] (%s) has no quota for: it would never be admitted", r, gi, g.Name)
			case q.MilliValue() > limit:
				at("a gang needs %s of %s, more than a ClusterQueue of %s can ever use: it would never be admitted", q.String(), r, g.Name)
			}
		}
	}
	return errs
}

// maxUsable is the most of resource r one ClusterQueue of group g can ever
// use, in milli-units: its guaranteed part plus the whole cohort's lendable
// quota, capped by nominal + borrowingLimit.
func maxUsable(g *Group, r corev1.ResourceName) (int64, bool) {
	for _, q := range g.Quota {
		if q.Resource != r {
			continue
		}
		nominal := q.Nominal.MilliValue()
		lendable := nominal
		if q.LendingLimit != nil {
			lendable = q.LendingLimit.MilliValue()
		}
		limit := nominal - lendable + lendable*int64(g.ClusterQueues)
		if q.BorrowingLimit != nil {
			limit = min(limit, nominal+q.BorrowingLimit.MilliValue())
		}
		return limit, true
	}
	return 0, false
}

func negative(q *resource.Quantity) bool { return q != nil && q.Sign() < 0 }

// digits is the number of decimal digits of n-1 (at least 1): the width
// that zero-pads indexes 0..n-1 to one length.
func digits(n int) int { return len(strconv.Itoa(max(n-1, 0))) }

func compare(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
