// Package scenario describes a berth performance scenario — cohorts of
// ClusterQueues with quotas, and classes of workloads that arrive at fixed
// intervals in every ClusterQueue — loads it from YAML, expands it into the
// exact list of workloads a run creates, and computes the floor the scenario
// imposes on any scheduler: the quota floor, an ideal zero-latency greedy
// scheduler replayed over the scenario (see Replay).
//
// The package is pure: no client, no clock, no goroutines. The runner in
// test/perf/runner turns a Scenario into API objects and load.
package scenario

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/test/perf/scenarios"
)

// Scenario is one performance scenario, as written in YAML. Every
// ClusterQueue of every group receives every workload class.
type Scenario struct {
	// Name identifies the scenario in reports.
	Name string `json:"name"`
	// Description says what the scenario is for.
	Description string `json:"description,omitempty"`
	// Flavor is the ResourceFlavor every ClusterQueue hands out quota for.
	// Default: "default".
	Flavor string `json:"flavor,omitempty"`
	// Groups are sets of identical cohorts.
	Groups []Group `json:"cohorts"`
	// Classes are the workload classes each ClusterQueue receives.
	Classes []Class `json:"workloadClasses"`
	// Layout is the node layout of topology scenarios; optional.
	Layout *Layout `json:"layout,omitempty"`
}

// Group is Count identical cohorts of ClusterQueues identical ClusterQueues
// each. Cohort i of group g is named "<g>-<i>" and its ClusterQueue j
// "<g>-<i>-q<j>" (zero-padded, so names sort in creation order).
type Group struct {
	// Name prefixes the group's cohorts and ClusterQueues.
	Name string `json:"name"`
	// Count is the number of cohorts.
	Count int `json:"count"`
	// ClusterQueues is the number of ClusterQueues per cohort.
	ClusterQueues int `json:"clusterQueues"`
	// Quota is every ClusterQueue's quota, one entry per resource.
	Quota []Quota `json:"quota"`
	// QueueingStrategy of every ClusterQueue: StrictFIFO or BestEffortFIFO
	// (default).
	QueueingStrategy string `json:"queueingStrategy,omitempty"`
	// Preemption policy of every ClusterQueue. Default: never preempt.
	Preemption Preemption `json:"preemption,omitempty"`
}

// Quota is a ClusterQueue's quota of one resource.
type Quota struct {
	// Resource names the resource, e.g. cpu or nvidia.com/gpu.
	Resource corev1.ResourceName `json:"resource"`
	// Nominal quota.
	Nominal resource.Quantity `json:"nominal"`
	// BorrowingLimit on top of nominal; unset means no limit but the cohort.
	BorrowingLimit *resource.Quantity `json:"borrowingLimit,omitempty"`
	// LendingLimit caps what the cohort may borrow of nominal; unset: all.
	LendingLimit *resource.Quantity `json:"lendingLimit,omitempty"`
}

// Preemption is a ClusterQueue's preemption policy, as in the ClusterQueue
// API (Never, LowerPriority, LowerOrNewerEqualPriority, Any).
type Preemption struct {
	// WithinClusterQueue: Never, LowerPriority or LowerOrNewerEqualPriority.
	WithinClusterQueue string `json:"withinClusterQueue,omitempty"`
	// ReclaimWithinCohort: Never, LowerPriority or Any.
	ReclaimWithinCohort string `json:"reclaimWithinCohort,omitempty"`
}

// Class is a set of identical workloads each ClusterQueue receives: Count
// of them, the first at Start and then one every Interval.
type Class struct {
	// Name of the class, used in workload names and reports.
	Name string `json:"name"`
	// Count of workloads per ClusterQueue.
	Count int `json:"count"`
	// Start is when the first workload arrives, from the start of the run.
	Start metav1.Duration `json:"start,omitempty"`
	// Interval between two arrivals in one ClusterQueue.
	Interval metav1.Duration `json:"interval"`
	// Runtime is how long a workload runs once admitted.
	Runtime metav1.Duration `json:"runtime"`
	// Priority of the workloads (higher first).
	Priority int32 `json:"priority,omitempty"`
	// PodsPerGang is the number of pods admitted together. Default: 1.
	PodsPerGang int32 `json:"podsPerGang,omitempty"`
	// Request is what one pod requests.
	Request corev1.ResourceList `json:"request"`
	// Topology the gang needs, optional: the Workload's spec.topology (the
	// annotation on a Job).
	Topology *Topology `json:"topology,omitempty"`
}

// Topology modes.
const (
	// TopologyRequired: all pods of the gang in one domain of the level.
	TopologyRequired = "Required"
	// TopologyPreferred: in one domain if possible.
	TopologyPreferred = "Preferred"
)

// Topology is a gang's topology requirement.
type Topology struct {
	// Level is the node label key of the topology level, e.g. a rack label.
	Level string `json:"level"`
	// Mode is Required or Preferred.
	Mode string `json:"mode"`
}

// Layout is the node layout of a topology scenario: Racks racks of
// NodesPerRack identical nodes.
type Layout struct {
	// Racks is the number of racks.
	Racks int `json:"racks"`
	// NodesPerRack is the number of nodes in each rack.
	NodesPerRack int `json:"nodesPerRack"`
	// RackLabel is the node label key whose value names the rack.
	RackLabel string `json:"rackLabel"`
	// GPUsPerNode is each node's nvidia.com/gpu capacity.
	GPUsPerNode int `json:"gpusPerNode"`
	// CreateNodes makes the runner create the Node objects, Ready (no
	// kubelet plays them), and gives the flavor the levels rack and
	// hostname, so berth places gangs in racks.
	CreateNodes bool `json:"createNodes,omitempty"`
}

// Named loads one of the scenarios shipped in test/perf/scenarios by name
// ("baseline"), or, when name contains a path separator or ends in .yaml, a
// file.
func Named(name string) (*Scenario, error) {
	if strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".yaml") {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading scenario: %w", err)
		}
		return Parse(data)
	}
	data, err := fs.ReadFile(scenarios.FS(), name+".yaml")
	if err != nil {
		return nil, fmt.Errorf("no shipped scenario %q (have %s): %w", name, strings.Join(Shipped(), ", "), err)
	}
	return Parse(data)
}

// Shipped lists the names of the shipped scenarios.
func Shipped() []string {
	entries, _ := fs.Glob(scenarios.FS(), "*.yaml")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e, ".yaml"))
	}
	return out
}

// Parse reads a scenario from YAML, rejecting unknown fields, applies
// defaults and validates it.
func Parse(data []byte) (*Scenario, error) {
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, fmt.Errorf("parsing scenario: %w", err)
	}
	s.Default()
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %q: %w", s.Name, err)
	}
	return s, nil
}

// Default fills in defaults.
func (s *Scenario) Default() {
	if s.Flavor == "" {
		s.Flavor = "default"
	}
	for i := range s.Groups {
		if s.Groups[i].QueueingStrategy == "" {
			s.Groups[i].QueueingStrategy = "BestEffortFIFO"
		}
	}
	for i := range s.Classes {
		if s.Classes[i].PodsPerGang == 0 {
			s.Classes[i].PodsPerGang = 1
		}
	}
}

// WorkloadCount is the number of workloads the scenario creates.
func (s *Scenario) WorkloadCount() int {
	perCQ := 0
	for _, c := range s.Classes {
		perCQ += c.Count
	}
	return perCQ * len(s.ClusterQueues())
}

// ClassIndex returns the index of the named class, or -1.
func (s *Scenario) ClassIndex(name string) int {
	for i, c := range s.Classes {
		if c.Name == name {
			return i
		}
	}
	return -1
}
