package sim

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/internal/sim/trace"
)

// notUsedByJob is the scale-ups that did not run the job they were made
// for.
func notUsedByJob(r PolicyResult) int { return r.ScaleUps.Total - r.ScaleUps.UsedByJob }

// singlePod reports whether a trace job is a single pod with no topology
// request: the jobs a flavor's singlePodJobs policy is about.
func singlePod(j trace.Job) bool { return j.Pods == 1 && j.Topology.Mode == "" }

// TestSmallJobsScenario runs the shipped mostly-single-GPU trace and checks
// what docs/coordination.md reports of it: it has the public trace's shape,
// and berth, whose flavor leaves single-pod jobs to the autoscaler by
// default, creates no more nodes its jobs cannot use than the uncoordinated
// cluster and uses no more node-hours (within 1 %).
func TestSmallJobsScenario(t *testing.T) {
	sc, tr := shipped(t, "small-jobs")
	single := 0
	for _, j := range tr.Jobs {
		if singlePod(j) {
			single++
		}
	}
	if share := float64(single) / float64(len(tr.Jobs)); len(tr.Jobs) < 1400 || share < 0.94 || share > 0.98 {
		t.Fatalf("%d jobs, %.1f %% single pods: want about 1,476 jobs, 96 %% of them single pods", len(tr.Jobs), 100*share)
	}
	_, by := simulateByPolicy(t, sc, tr)
	b, u := by[Berth], by[Uncoordinated]
	if b.Started != b.Jobs {
		t.Errorf("berth started %d of %d jobs", b.Started, b.Jobs)
	}
	if b.NodeHours > 1.01*u.NodeHours {
		t.Errorf("berth used %.0f node-hours, uncoordinated %.0f", b.NodeHours, u.NodeHours)
	}
	if notUsedByJob(b) > notUsedByJob(u) {
		t.Errorf("berth created %d nodes its jobs did not use, uncoordinated %d", notUsedByJob(b), notUsedByJob(u))
	}
}

// TestSinglePodJobsBookOnlyWhenTheFlavorSaysSo: under the flavor's default
// no single-pod job of the small-jobs trace books a ProvisioningRequest,
// while gangs do; with singlePodJobs: Book they book too.
func TestSinglePodJobsBookOnlyWhenTheFlavorSaysSo(t *testing.T) {
	for _, policy := range []berthv1.SinglePodJobsPolicy{"", berthv1.SinglePodJobsBook} {
		t.Run("singlePodJobs="+string(policy), func(t *testing.T) {
			sc, tr := shipped(t, "small-jobs")
			sc.Flavors[0].Spec.Provisioning.SinglePodJobs = policy
			r, _ := runPolicy(t, sc, tr, Berth)
			var singles, gangs int
			for _, j := range r.jobs {
				if j.shell.(*shellJob).wl.Status.Provisioning == nil {
					continue
				}
				if singlePod(j.spec) {
					singles++
				} else {
					gangs++
				}
			}
			if gangs == 0 {
				t.Errorf("no gang booked capacity")
			}
			if (singles > 0) != (policy == berthv1.SinglePodJobsBook) {
				t.Errorf("%d single-pod jobs booked capacity", singles)
			}
		})
	}
}

// twoFlavors: a flavor of two reserved 8-GPU nodes in two racks that
// cannot grow, ahead of an on-demand flavor whose rack r3 can grow by two
// nodes, in one resource group; one team with 16 GPUs of each.
const twoFlavors = `
apiVersion: berth.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: reserved}
spec:
  nodeLabels: {example.com/capacity: reserved}
  topologyLevels: [example.com/rack, kubernetes.io/hostname]
---
apiVersion: berth.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: on-demand}
spec:
  nodeLabels: {example.com/capacity: on-demand}
  topologyLevels: [example.com/rack, kubernetes.io/hostname]
  provisioning: {mode: IfNeeded}
---
apiVersion: berth.dev/v1alpha1
kind: CapacityPool
metadata: {name: reserved-r1}
spec:
  flavor: reserved
  minNodes: 1
  maxNodes: 1
  nodeTemplate:
    labels: {example.com/capacity: reserved, example.com/rack: r1}
    allocatable: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
---
apiVersion: berth.dev/v1alpha1
kind: CapacityPool
metadata: {name: reserved-r2}
spec:
  flavor: reserved
  minNodes: 1
  maxNodes: 1
  nodeTemplate:
    labels: {example.com/capacity: reserved, example.com/rack: r2}
    allocatable: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
---
apiVersion: berth.dev/v1alpha1
kind: CapacityPool
metadata: {name: on-demand-r3}
spec:
  flavor: on-demand
  maxNodes: 2
  nodeTemplate:
    labels: {example.com/capacity: on-demand, example.com/rack: r3}
    allocatable: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
---
apiVersion: berth.dev/v1alpha1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: reserved
      resources:
      - {name: cpu, nominalQuota: "192"}
      - {name: memory, nominalQuota: 2Ti}
      - {name: nvidia.com/gpu, nominalQuota: "16"}
    - name: on-demand
      resources:
      - {name: cpu, nominalQuota: "192"}
      - {name: memory, nominalQuota: 2Ti}
      - {name: nvidia.com/gpu, nominalQuota: "16"}
---
apiVersion: berth.dev/v1alpha1
kind: LocalQueue
metadata: {name: train, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: sim.berth.dev/v1alpha1
kind: Model
drain: 4h
`

// gpuFlavor is the flavor j's GPUs were admitted on ("" if never).
func gpuFlavor(j *job) string {
	a := j.shell.(*shellJob).wl.Status.Admission
	if a == nil {
		return ""
	}
	return a.PodSetAssignments[0].Flavors[corev1.ResourceName("nvidia.com/gpu")]
}

// TestATopologyGangFallsBackToTheFlavorThatProvisions: a rack-bound gang of
// two 8-GPU pods fits the reserved flavor's quota, but no reserved rack
// holds two nodes; berth books a rack of the on-demand flavor for it and it
// runs there, once.
func TestATopologyGangFallsBackToTheFlavorThatProvisions(t *testing.T) {
	sc := readScenarioString(t, twoFlavors)
	tr := trace.Trace{Jobs: []trace.Job{gangJob("g", "team-a", 0, 2, trace.Topology{Mode: "Required", Level: "example.com/rack"})}}
	r, res := runPolicy(t, sc, tr, Berth)
	j := r.jobs[0]
	if res.Started != 1 || res.Evictions != 0 {
		t.Fatalf("started %d, evictions %d; want the gang started once\n%s", res.Started, res.Evictions, r.log)
	}
	if f := gpuFlavor(j); f != "on-demand" {
		t.Errorf("admitted on %q, want on-demand", f)
	}
	p := j.shell.(*shellJob).wl.Status.Provisioning
	if p == nil || p.Flavor != "on-demand" || p.Topology == nil || p.Topology.Values[0] != "r3" {
		t.Errorf("booking %+v, want one in rack r3 of on-demand", p)
	}
	if j.firstStart <= 0 || j.firstStart > time.Hour {
		t.Errorf("started at %s, want once its booked nodes joined", j.firstStart)
	}
}

// TestReservedThenCloudScenario runs the shipped two-flavor scenario on the
// mixed-training trace: berth runs every job, topology gangs run on both
// flavors (the reserved one first, the on-demand one when no reserved rack
// can take them), and it holds fewer GPUs in partial gangs than either
// alternative.
func TestReservedThenCloudScenario(t *testing.T) {
	sc, tr := shippedWith(t, "reserved-then-cloud", "mixed-training")
	_, by := simulateByPolicy(t, sc, tr)
	b := by[Berth]
	if b.Started != b.Jobs {
		t.Errorf("berth started %d of %d jobs", b.Started, b.Jobs)
	}
	for _, other := range []string{Uncoordinated, QuotaOnly} {
		if o := by[other]; b.GPUHours.Partial >= o.GPUHours.Partial {
			t.Errorf("berth holds %.0f GPU-hours in partial gangs, %s %.0f", b.GPUHours.Partial, other, o.GPUHours.Partial)
		}
	}
	r, _ := runPolicy(t, sc, tr, Berth)
	on := map[string]int{}
	for _, j := range r.jobs {
		if j.spec.Topology.Mode != "" {
			on[gpuFlavor(j)]++
		}
	}
	if on["h200-reserved"] == 0 || on["h200-on-demand"] == 0 {
		t.Errorf("topology gangs per flavor %v: want some on each", on)
	}
}
