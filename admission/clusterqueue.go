package admission

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// UpsertClusterQueue creates or updates a ClusterQueue. An invalid spec returns an
// error saying what to fix and leaves the engine unchanged. Changing quotas or the
// cohort makes every pending workload of the affected queues eligible for
// re-evaluation in the next Cycle.
func (e *Engine) UpsertClusterQueue(cq ClusterQueue) error {
	if err := validateClusterQueue(&cq); err != nil {
		return fmt.Errorf("invalid ClusterQueue %q: %w", cq.Name, err)
	}
	spec := cloneClusterQueue(cq)
	c := e.queues.cqStateFor(spec.Name)
	oldCohort := c.cohort
	e.queues.detachCohort(c)
	c.spec = spec
	e.names.compile(c)
	e.queues.attachCohort(c, spec.Cohort)
	e.fair.touchCohort(oldCohort, refreshAll)
	e.fair.touchQueueAndCohort(c, refreshAll)
	if spec.Drain {
		e.evict.drained[spec.Name] = struct{}{}
	}
	return nil
}

// DeleteClusterQueue forgets a ClusterQueue's spec. Its pending workloads stay held
// (reason ClusterQueueNotFound) until a ClusterQueue of that name returns; its
// admitted workloads keep their usage until they are deleted or evicted.
func (e *Engine) DeleteClusterQueue(name string) {
	c, ok := e.queues.cqs[name]
	if !ok || c.spec == nil {
		return
	}
	oldCohort := c.cohort
	e.queues.detachCohort(c)
	c.spec = nil
	e.names.compile(c)
	e.fair.touchCohort(oldCohort, refreshAll)
	e.fair.touchQueueAndCohort(c, refreshAll)
	e.queues.maybeDropCQ(c)
}

// compile turns the spec into interned, indexed quota tables.
func (nm *names) compile(c *cqState) {
	c.groups = nil
	c.resGroup = map[int32]int{}
	c.quota = map[frKey]frQuota{}
	if c.spec == nil {
		return
	}
	inCohort := c.spec.Cohort != ""
	for gi, g := range c.spec.ResourceGroups {
		gs := groupState{}
		for _, r := range g.CoveredResources {
			id := nm.resID(r)
			gs.resources = append(gs.resources, id)
			c.resGroup[id] = gi
		}
		for _, f := range g.Flavors {
			fid := nm.flavorID(f.Flavor)
			gs.flavors = append(gs.flavors, flavorState{name: f.Flavor, id: fid, nodes: newFlavorNodes(f.NodeLabels)})
			for r, q := range f.Resources {
				c.quota[makeFR(fid, nm.resID(r))] = compileQuota(q, inCohort)
			}
		}
		c.groups = append(c.groups, gs)
	}
}

func compileQuota(q Quota, inCohort bool) frQuota {
	out := frQuota{nominal: q.Nominal, borrowLimit: -1, guaranteed: q.Nominal}
	if q.BorrowingLimit != nil {
		out.borrowLimit = *q.BorrowingLimit
	}
	if !inCohort {
		out.borrowLimit = 0
		return out
	}
	out.lendable = q.Nominal
	if q.LendingLimit != nil {
		out.lendable = min(*q.LendingLimit, q.Nominal)
	}
	out.guaranteed = q.Nominal - out.lendable
	return out
}

func validateClusterQueue(cq *ClusterQueue) error {
	if cq.Name == "" {
		return errors.New("name must not be empty")
	}
	switch cq.QueueingStrategy {
	case "", StrictFIFO, BestEffortFIFO:
	default:
		return fmt.Errorf("queueingStrategy %q: must be StrictFIFO or BestEffortFIFO", cq.QueueingStrategy)
	}
	if cq.FairShareWeight < 0 {
		return fmt.Errorf("fairShareWeight %d: must not be negative", cq.FairShareWeight)
	}
	if err := validatePreemption(cq.Preemption); err != nil {
		return err
	}
	covered := map[ResourceName]bool{}
	flavors := map[string]bool{}
	for gi, g := range cq.ResourceGroups {
		if err := validateGroup(cq, g, covered, flavors); err != nil {
			return fmt.Errorf("resourceGroups[%d]: %w", gi, err)
		}
	}
	return nil
}

func validatePreemption(p PreemptionPolicy) error {
	switch p.WithinClusterQueue {
	case "", PreemptNever, PreemptLowerPriority, PreemptLowerOrNewerEqualPriority:
	default:
		return fmt.Errorf("preemption.withinClusterQueue %q: must be Never, LowerPriority or LowerOrNewerEqualPriority", p.WithinClusterQueue)
	}
	switch p.ReclaimWithinCohort {
	case "", PreemptNever, PreemptLowerPriority, PreemptAny:
	default:
		return fmt.Errorf("preemption.reclaimWithinCohort %q: must be Never, LowerPriority or Any", p.ReclaimWithinCohort)
	}
	switch p.FairSharing {
	case "", PreemptNever, PreemptLowerPriority, PreemptAny:
	default:
		return fmt.Errorf("preemption.fairSharing %q: must be Never, LowerPriority or Any", p.FairSharing)
	}
	return nil
}

func validateGroup(cq *ClusterQueue, g ResourceGroup, covered map[ResourceName]bool, flavors map[string]bool) error {
	if len(g.CoveredResources) == 0 {
		return errors.New("coveredResources must not be empty")
	}
	for _, r := range g.CoveredResources {
		if r == "" {
			return errors.New("coveredResources: resource name must not be empty")
		}
		if covered[r] {
			return fmt.Errorf("resource %q is covered more than once; each resource belongs to one group", r)
		}
		covered[r] = true
	}
	if len(g.Flavors) == 0 {
		return errors.New("flavors must not be empty")
	}
	for fi, f := range g.Flavors {
		if f.Flavor == "" {
			return fmt.Errorf("flavors[%d]: flavor name must not be empty", fi)
		}
		if flavors[f.Flavor] {
			return fmt.Errorf("flavors[%d]: flavor %q appears more than once in the ClusterQueue", fi, f.Flavor)
		}
		flavors[f.Flavor] = true
		if len(f.Resources) != len(g.CoveredResources) {
			return fmt.Errorf("flavor %q: must set a quota for exactly the covered resources %v", f.Flavor, g.CoveredResources)
		}
		for _, r := range g.CoveredResources {
			q, ok := f.Resources[r]
			if !ok {
				return fmt.Errorf("flavor %q: missing quota for covered resource %q", f.Flavor, r)
			}
			if err := validateQuota(q, cq.Cohort != ""); err != nil {
				return fmt.Errorf("flavor %q resource %q: %w", f.Flavor, r, err)
			}
		}
	}
	return nil
}

func validateQuota(q Quota, inCohort bool) error {
	if q.Nominal < 0 || q.Nominal > MaxAmount {
		return fmt.Errorf("nominalQuota %d: must be between 0 and %d", q.Nominal, MaxAmount)
	}
	if q.BorrowingLimit != nil {
		if *q.BorrowingLimit < 0 || *q.BorrowingLimit > MaxAmount {
			return fmt.Errorf("borrowingLimit %d: must be between 0 and %d", *q.BorrowingLimit, MaxAmount)
		}
		if !inCohort && *q.BorrowingLimit != 0 {
			return errors.New("borrowingLimit is set but the ClusterQueue has no cohort; set a cohort or remove the limit")
		}
	}
	if q.LendingLimit != nil {
		if *q.LendingLimit < 0 || *q.LendingLimit > MaxAmount {
			return fmt.Errorf("lendingLimit %d: must be between 0 and %d", *q.LendingLimit, MaxAmount)
		}
		if !inCohort {
			return errors.New("lendingLimit is set but the ClusterQueue has no cohort; set a cohort or remove the limit")
		}
	}
	return nil
}

// cloneClusterQueue deep-copies the spec so later changes by the caller cannot reach
// the engine.
func cloneClusterQueue(cq ClusterQueue) *ClusterQueue {
	out := cq
	out.ResourceGroups = make([]ResourceGroup, len(cq.ResourceGroups))
	for i, g := range cq.ResourceGroups {
		ng := ResourceGroup{CoveredResources: slices.Clone(g.CoveredResources)}
		for _, f := range g.Flavors {
			nf := FlavorQuotas{Flavor: f.Flavor, Resources: make(map[ResourceName]Quota, len(f.Resources)), NodeLabels: maps.Clone(f.NodeLabels)}
			for r, q := range f.Resources {
				if q.BorrowingLimit != nil {
					v := *q.BorrowingLimit
					q.BorrowingLimit = &v
				}
				if q.LendingLimit != nil {
					v := *q.LendingLimit
					q.LendingLimit = &v
				}
				nf.Resources[r] = q
			}
			ng.Flavors = append(ng.Flavors, nf)
		}
		out.ResourceGroups[i] = ng
	}
	return &out
}
