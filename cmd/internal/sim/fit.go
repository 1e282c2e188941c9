package sim

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// LeftOut are the jobs of a trace that no policy could ever run on the
// modelled cluster: more pods than the node groups can hold at their
// largest (maxNodes), in all or in any one domain of a Required topology,
// or pods no node group's nodes can take (too large, or a node selector
// no template matches). Simulate leaves them out of the runs: they would
// otherwise wait to the end and count the cluster's idle GPUs as "idle
// while waiting" for the whole trace.
type LeftOut struct {
	// Jobs is how many jobs were left out.
	Jobs int `json:"jobs"`
	// Largest is the one asking for the most GPUs (then pods), with its
	// pods and GPUs, to say what the cluster is short of.
	Largest     string `json:"largest,omitempty"`
	LargestPods int32  `json:"largestPods,omitempty"`
	LargestGPUs int64  `json:"largestGPUs,omitempty"`
}

// splitNeverFits returns the jobs of tr that could fit the cluster of sc
// at its largest, and a summary of those that never can.
func splitNeverFits(sc Scenario, tr trace.Trace, gpu corev1.ResourceName) (trace.Trace, LeftOut) {
	c := newCluster(sc, gpu)
	var left LeftOut
	kept := make([]trace.Job, 0, len(tr.Jobs))
	for _, j := range tr.Jobs {
		if int64(j.Pods) <= c.mostPods(j) {
			kept = append(kept, j)
			continue
		}
		left.Jobs++
		q := j.Requests[gpu]
		gpus := q.Value() * int64(j.Pods)
		if left.Largest == "" || gpus > left.LargestGPUs || (gpus == left.LargestGPUs && j.Pods > left.LargestPods) {
			left.Largest, left.LargestPods, left.LargestGPUs = j.ID, j.Pods, gpus
		}
	}
	return trace.Trace{Jobs: kept}, left
}

// mostPods is how many pods of j the cluster can hold at once when every
// node group is at maxNodes and nothing else runs: over all groups, or,
// for a Required topology, in the one domain of its level that holds the
// most.
func (c *cluster) mostPods(j trace.Job) int64 {
	req := c.res.amountsOf(j.Requests)
	level := ""
	if j.Topology.Mode == trace.Required {
		level = j.Topology.Level
	}
	perDomain := map[string]int64{}
	for _, g := range c.groups {
		per := podsPerNode(&g.alloc, &req)
		if per == 0 {
			continue
		}
		for domain, nodes := range g.domains(j.NodeSelector, level) {
			perDomain[domain] = satAdd(perDomain[domain], satMul(per, int64(nodes)))
		}
	}
	var most, all int64
	for _, n := range perDomain {
		most, all = max(most, n), satAdd(all, n)
	}
	if level == "" {
		return all
	}
	return most
}

// domains are the nodes g can have at its largest that a pod with
// selector may use, by their value of level ("" when level is ""). A
// group whose template lacks level has no domain of it, except that the
// hostname level makes each node its own domain; a group that spans
// racks spreads its nodes over them round robin.
func (g *group) domains(selector map[string]string, level string) map[string]int32 {
	labels := g.templateLabels()
	racks := map[string]int32{}
	if len(g.model.Racks) > 0 {
		for i := range g.pool.Spec.MaxNodes {
			racks[g.model.Racks[int(i)%len(g.model.Racks)]]++
		}
	}
	for k, v := range selector {
		if len(racks) > 0 && k == g.model.RackLabel {
			racks = map[string]int32{v: racks[v]}
			continue
		}
		if labels[k] != v {
			return nil
		}
	}
	switch {
	case level == corev1.LabelHostname:
		// One node is the domain: keyed by group, so that groups are not
		// summed.
		return map[string]int32{g.pool.Name: min(1, g.pool.Spec.MaxNodes)}
	case len(racks) > 0 && (level == "" || level == g.model.RackLabel):
		if level == "" {
			var n int32
			for _, c := range racks {
				n += c
			}
			return map[string]int32{"": n}
		}
		return racks
	case level == "":
		return map[string]int32{"": g.pool.Spec.MaxNodes}
	}
	v, ok := labels[level]
	if !ok {
		return nil
	}
	return map[string]int32{v: g.pool.Spec.MaxNodes}
}

// satAdd and satMul add and multiply non-negative counts, saturating at
// MaxInt64 rather than overflowing.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
