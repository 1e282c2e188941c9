package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/autoscale"
)

// ModelAPIVersion is the apiVersion of the simulator's own document, the
// cluster model that berth's objects do not describe.
const ModelAPIVersion = "sim.berth.dev/v1alpha1"

// Scenario is what a simulation runs on: the queueing objects a user
// applies, and the model of the cluster beneath them.
type Scenario struct {
	Flavors       []berthv1.ResourceFlavor
	ClusterQueues []berthv1.ClusterQueue
	LocalQueues   []berthv1.LocalQueue
	Pools         []berthv1.CapacityPool
	Model         Model
}

// Model is the cluster beneath the queues: how its node groups grow and
// shrink, how the autoscaler and the scheduler behave, and how long the
// simulation runs after the last submission.
type Model struct {
	// Groups model each CapacityPool as an autoscaler node group, by pool
	// name. A pool without an entry gets DefaultGroup.
	Groups map[string]GroupModel `json:"groups,omitempty"`
	// Autoscaler is cluster-autoscaler's behaviour.
	Autoscaler AutoscalerModel `json:"autoscaler,omitzero"`
	// Scheduler is kube-scheduler's behaviour.
	Scheduler SchedulerModel `json:"scheduler,omitzero"`
	// Controller is berth-controller's settings that change decisions.
	Controller ControllerModel `json:"controller,omitzero"`
	// Drain is how long the simulation goes on after the last submission;
	// jobs not started by then are reported as never started. Default 24h.
	Drain Duration `json:"drain,omitempty"`
	// SampleEvery is the period of the time series in the report. Default 5m.
	SampleEvery Duration `json:"sampleEvery,omitempty"`
	// Headroom keeps warm capacity for inference services (HeadroomModel).
	Headroom []HeadroomModel `json:"headroom,omitempty"`
}

// GroupModel is one node group's cloud behaviour.
type GroupModel struct {
	// Existing is how many nodes the group has at the start; default the
	// pool's minNodes.
	Existing *int32 `json:"existing,omitempty"`
	// Latency is how long a new node takes to become allocatable; unset,
	// DefaultGroup's.
	Latency Distribution `json:"latency,omitzero"`
	// Stockouts are windows in which the group cannot grow: the cloud has
	// no instances of its type.
	Stockouts []Window `json:"stockouts,omitempty"`
	// Racks, when set, makes the group span racks: each new node's value
	// of RackLabel is drawn from Racks at boot, round robin, so no one can
	// ask the group for a rack.
	Racks []string `json:"racks,omitempty"`
	// RackLabel is the label Racks are values of.
	RackLabel string `json:"rackLabel,omitempty"`
}

// Window is a span of simulated time, from the start of the trace.
type Window struct {
	From Duration `json:"from"`
	To   Duration `json:"to"`
}

// Distribution is a duration drawn at random: Fixed when set, else
// log-normal with Median and Sigma, clamped to [Min, Max].
type Distribution struct {
	Fixed  Duration `json:"fixed,omitempty"`
	Median Duration `json:"median,omitempty"`
	Sigma  float64  `json:"sigma,omitempty"`
	Min    Duration `json:"min,omitempty"`
	Max    Duration `json:"max,omitempty"`
}

// AutoscalerModel is cluster-autoscaler's behaviour; zero fields take
// cluster-autoscaler's defaults.
type AutoscalerModel struct {
	// ScanInterval is the loop period (--scan-interval, 10s).
	ScanInterval Duration `json:"scanInterval,omitempty"`
	// ScaleDownDelay is how long a node must be empty before it is removed
	// (--scale-down-unneeded-time, 10m).
	ScaleDownDelay Duration `json:"scaleDownDelay,omitempty"`
	// BookingExpiry is how long a provisioned request books its capacity
	// (a constant 10m in cluster-autoscaler).
	BookingExpiry Duration `json:"bookingExpiry,omitempty"`
	// InitialBackoff and MaxBackoff bound the retries of a request that
	// found no capacity (1m doubling to 10m).
	InitialBackoff Duration `json:"initialBackoff,omitempty"`
	MaxBackoff     Duration `json:"maxBackoff,omitempty"`
}

// ControllerModel is berth-controller's flags that the engine's decisions
// depend on; unset, the flags' defaults.
type ControllerModel struct {
	// FairSharing is --fair-sharing (default true).
	FairSharing *bool `json:"fairSharing,omitempty"`
	// LocalQueueFairSharing is --local-queue-fair-sharing (default false).
	LocalQueueFairSharing bool `json:"localQueueFairSharing,omitempty"`
}

// engineOptions are the engine's options as berth-controller sets them
// from its flags.
func (c ControllerModel) engineOptions() admission.Options {
	o := admission.DefaultOptions()
	if c.FairSharing != nil {
		o.FairSharing = *c.FairSharing
	}
	o.LocalQueueFairSharing = c.LocalQueueFairSharing
	return o
}

// SchedulerModel is kube-scheduler's node scoring.
type SchedulerModel struct {
	// Scoring is LeastAllocated (kube-scheduler's default: spread) or
	// MostAllocated (pack).
	Scoring string `json:"scoring,omitempty"`
}

// Scoring strategies.
const (
	LeastAllocated = "LeastAllocated"
	MostAllocated  = "MostAllocated"
)

// DefaultGroup is the model of a node group the scenario does not
// describe: GPU nodes become allocatable in minutes (see
// docs/coordination.md for the sources), never out of stock.
func DefaultGroup() GroupModel {
	return GroupModel{Latency: Distribution{Median: Duration(6 * time.Minute), Sigma: 0.35,
		Min: Duration(3 * time.Minute), Max: Duration(20 * time.Minute)}}
}

// withDefaults fills the zero fields with cluster-autoscaler's defaults.
func (m Model) withDefaults() Model {
	a := &m.Autoscaler
	a.ScanInterval = orDuration(a.ScanInterval, autoscale.ScanInterval)
	a.ScaleDownDelay = orDuration(a.ScaleDownDelay, autoscale.ScaleDownUnneeded)
	a.BookingExpiry = orDuration(a.BookingExpiry, autoscale.BookingTTL)
	a.InitialBackoff = orDuration(a.InitialBackoff, autoscale.InitialBackoff)
	a.MaxBackoff = orDuration(a.MaxBackoff, autoscale.MaxBackoff)
	if m.Scheduler.Scoring == "" {
		m.Scheduler.Scoring = LeastAllocated
	}
	m.Drain = orDuration(m.Drain, 24*time.Hour)
	m.SampleEvery = orDuration(m.SampleEvery, 5*time.Minute)
	return m
}

func orDuration(d Duration, def time.Duration) Duration {
	if d == 0 {
		return Duration(def)
	}
	return d
}

// group is the model of pool p.
func (m Model) group(p string) GroupModel {
	g, ok := m.Groups[p]
	if !ok {
		return DefaultGroup()
	}
	if g.Latency == (Distribution{}) {
		g.Latency = DefaultGroup().Latency
	}
	return g
}

// ReadScenario reads a scenario: a stream of YAML or JSON documents holding
// berth's ResourceFlavors, ClusterQueues, LocalQueues and CapacityPools —
// the objects a user applies — and at most one Model document (apiVersion
// sim.berth.dev/v1alpha1, kind Model). Other objects are errors: the
// simulator would silently ignore what they mean.
func ReadScenario(r io.Reader, source string) (Scenario, error) {
	s, err := readDocuments(r, source)
	if err != nil {
		return Scenario{}, err
	}
	s, err = s.Complete()
	if err != nil {
		return Scenario{}, fmt.Errorf("%s: %w", source, err)
	}
	return s, nil
}

// readDocuments decodes a scenario's documents without defaults.
func readDocuments(r io.Reader, source string) (Scenario, error) {
	var s Scenario
	seenModel := false
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	for doc := 1; ; doc++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return Scenario{}, fmt.Errorf("%s: document %d: %w", source, doc, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		isModel, err := s.add(u)
		if err != nil {
			return Scenario{}, fmt.Errorf("%s: document %d (%s): %w", source, doc, describe(u), err)
		}
		if isModel {
			if seenModel {
				return Scenario{}, fmt.Errorf("%s: document %d: a second %s Model; put the whole model in one", source, doc, ModelAPIVersion)
			}
			seenModel = true
		}
	}
	return s, nil
}

// describe names a document in an error: its kind, and its name when it
// has one (the Model has none, and "(Model )" reads like a typo).
func describe(u *unstructured.Unstructured) string {
	if u.GetName() == "" {
		return u.GetKind()
	}
	return u.GetKind() + " " + u.GetName()
}

// Complete fills the model's unset fields with cluster-autoscaler's and
// kube-scheduler's defaults and validates the scenario.
func (s Scenario) Complete() (Scenario, error) {
	s.Model = s.Model.withDefaults()
	if err := s.Validate(); err != nil {
		return Scenario{}, err
	}
	return s, nil
}

// ReadModel reads a Model document alone (for a scenario whose objects
// come from a cluster).
func ReadModel(r io.Reader, source string) (Model, error) {
	s, err := readDocuments(r, source)
	if err != nil {
		return Model{}, err
	}
	if len(s.Flavors)+len(s.ClusterQueues)+len(s.LocalQueues)+len(s.Pools) > 0 {
		return Model{}, fmt.Errorf("%s: holds berth objects; with objects from the cluster the file holds only the %s Model", source, ModelAPIVersion)
	}
	return s.Model, nil
}

// add decodes one document into s; it says whether it was the Model.
func (s *Scenario) add(u *unstructured.Unstructured) (bool, error) {
	raw, err := u.MarshalJSON()
	if err != nil {
		return false, fmt.Errorf("re-encoding: %w", err)
	}
	gv, kind := u.GetAPIVersion(), u.GetKind()
	if gv == ModelAPIVersion && kind == "Model" {
		var doc struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Model      `json:",inline"`
		}
		if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
			return false, fmt.Errorf("reading the model: %w", err)
		}
		s.Model = doc.Model
		return true, nil
	}
	if gv != berthv1.GroupVersion.String() {
		return false, fmt.Errorf("apiVersion %q: a scenario holds %s objects and one %s Model", gv, berthv1.GroupVersion, ModelAPIVersion)
	}
	switch kind {
	case "ResourceFlavor":
		return false, decodeInto(raw, &s.Flavors)
	case "ClusterQueue":
		return false, decodeInto(raw, &s.ClusterQueues)
	case "LocalQueue":
		return false, decodeInto(raw, &s.LocalQueues)
	case "CapacityPool":
		return false, decodeInto(raw, &s.Pools)
	}
	return false, fmt.Errorf("kind %q: the simulator reads ResourceFlavor, ClusterQueue, LocalQueue and CapacityPool", kind)
}

func decodeInto[T any](raw []byte, into *[]T) error {
	var obj T
	if err := yaml.UnmarshalStrict(raw, &obj); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	*into = append(*into, obj)
	return nil
}

// Validate reports what in the scenario the simulation cannot run with,
// each problem saying what to fix.
func (s Scenario) Validate() error {
	var errs []error
	flavors := map[string]bool{}
	for _, f := range s.Flavors {
		flavors[f.Name] = true
	}
	cqs := map[string]bool{}
	for _, cq := range s.ClusterQueues {
		cqs[cq.Name] = true
	}
	for _, lq := range s.LocalQueues {
		if !cqs[lq.Spec.ClusterQueue] {
			errs = append(errs, fmt.Errorf("LocalQueue %s/%s: ClusterQueue %q is not in the scenario", lq.Namespace, lq.Name, lq.Spec.ClusterQueue))
		}
	}
	pools := map[string]bool{}
	for _, p := range s.Pools {
		pools[p.Name] = true
		if !flavors[p.Spec.Flavor] {
			errs = append(errs, fmt.Errorf("CapacityPool %s: ResourceFlavor %q is not in the scenario", p.Name, p.Spec.Flavor))
		}
		if _, ok := p.Spec.NodeTemplate.Allocatable["nvidia.com/gpu"]; !ok && len(p.Spec.NodeTemplate.Allocatable) == 0 {
			errs = append(errs, fmt.Errorf("CapacityPool %s: nodeTemplate.allocatable is empty", p.Name))
		}
	}
	for _, name := range sortedKeys(s.Model.Groups) {
		if !pools[name] {
			errs = append(errs, fmt.Errorf("model.groups[%s]: no CapacityPool of that name", name))
			continue
		}
		errs = append(errs, s.Model.Groups[name].validate("model.groups["+name+"]")...)
	}
	if len(s.Pools) == 0 {
		errs = append(errs, errors.New("no CapacityPool: the cluster has no nodes; describe each node group as a CapacityPool"))
	}
	errs = append(errs, s.validateHeadroom()...)
	if sc := s.Model.Scheduler.Scoring; sc != LeastAllocated && sc != MostAllocated {
		errs = append(errs, fmt.Errorf("model.scheduler.scoring %q: use %s or %s", sc, LeastAllocated, MostAllocated))
	}
	return errors.Join(errs...)
}

func (g GroupModel) validate(path string) []error {
	var errs []error
	if g.Existing != nil && *g.Existing < 0 {
		errs = append(errs, fmt.Errorf("%s.existing: must not be negative, got %d", path, *g.Existing))
	}
	if err := g.Latency.validate(); g.Latency != (Distribution{}) && err != nil {
		errs = append(errs, fmt.Errorf("%s.latency: %w", path, err))
	}
	for i, w := range g.Stockouts {
		if w.To <= w.From {
			errs = append(errs, fmt.Errorf("%s.stockouts[%d]: to (%s) must be after from (%s)", path, i, w.To, w.From))
		}
	}
	if len(g.Racks) > 0 && g.RackLabel == "" {
		errs = append(errs, fmt.Errorf("%s: racks need rackLabel, the label their values are of", path))
	}
	return errs
}

func (d Distribution) validate() error {
	switch {
	case d.Fixed < 0 || d.Median < 0 || d.Min < 0 || d.Max < 0 || d.Sigma < 0:
		return errors.New("durations and sigma must not be negative")
	case d.Fixed == 0 && d.Median == 0:
		return errors.New("set fixed, or median (and sigma) for a log-normal")
	case d.Max > 0 && d.Max < d.Min:
		return fmt.Errorf("max (%s) must not be below min (%s)", d.Max, d.Min)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Duration is a time.Duration written as "90s" or "10m" in YAML and JSON.
type Duration time.Duration

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// UnmarshalJSON reads a duration string such as "90s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' {
		return fmt.Errorf("duration %s: write it as a string such as \"90s\" or \"10m\"", b)
	}
	v, err := time.ParseDuration(string(b[1 : len(b)-1]))
	if err != nil {
		return fmt.Errorf("duration %s: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// milliOf is q in milli-units.
func milliOf(q resource.Quantity) int64 { return q.MilliValue() }
