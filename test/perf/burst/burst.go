// Package burst runs the burst scenario on the full plane (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler and kwok GPU nodes):
// inference replicas — LeaderWorkerSet-shaped gangs of one leader and up to
// three workers — arrive within a few seconds on free capacity, once with
// kube-scheduler alone (the floor) and once through berth, and the report
// compares the time from a gang's creation until all its pods are bound.
//
// Both runs create the same plain pods on the same nodes; the berth run
// adds only berth's pod-group labels, so the difference is what berth's
// admission (gate, Workload, admission, ungating) costs. Plain pods keep an
// operator's own latency out of both runs.
package burst

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
)

// Options configure a run. Zero values get the defaults named per field.
type Options struct {
	// Gangs is how many inference replicas arrive. Default 2000.
	Gangs int
	// Window is the time over which they arrive, evenly spaced.
	// Default 10s.
	Window time.Duration
	// MaxGangSize bounds a gang's pods; gang i has 1 + i mod MaxGangSize
	// pods, one GPU each. Default 4.
	MaxGangSize int
	// Nodes is how many 8-GPU kwok nodes exist. Default: enough for every
	// pod plus an eighth spare.
	Nodes int
	// SchedulerQPS is kube-scheduler's client QPS (burst twice that), so
	// the floor is the scheduler's own speed rather than its default client
	// limit of 50 QPS. Default 500, berth's own default.
	SchedulerQPS int
	// PhaseTimeout bounds each run's wait for every pod to be bound.
	// Default 10m.
	PhaseTimeout time.Duration
	// DeletePage is how many pods one collection delete removes when a run
	// is cleaned up. One delete of a whole burst's pods outlives the API
	// server's request timeout on a 2-core machine ("the server was unable
	// to return a response in the time allotted"). Default 500.
	DeletePage int64
	// APIServerProfile, when set, is a directory where each berth run
	// writes a CPU profile of kube-apiserver over the run's first
	// ProfileSeconds: <dir>/apiserver-<namespace>.pprof.
	APIServerProfile string
	// ProfileSeconds is how long the API server is profiled. Default 30.
	ProfileSeconds int
	// JobWorkers is berth's --job-workers in the berth runs: how many gangs
	// of a kind are reconciled at once. Zero: berth's default.
	JobWorkers int
	// ApplyWorkers is berth's --apply-workers in the berth runs: how many
	// decisions are written at once. Zero: berth's default.
	ApplyWorkers int
	// Shape is what a gang is: ShapePods (default), ShapeDeployments or
	// ShapeLeaderWorkerSets.
	Shape Shape
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Shape == "" {
		o.Shape = ShapePods
	}
	if o.DeletePage == 0 {
		o.DeletePage = 500
	}
	if o.Gangs == 0 {
		o.Gangs = 2000
	}
	if o.Window == 0 {
		o.Window = 10 * time.Second
	}
	if o.MaxGangSize == 0 {
		o.MaxGangSize = 4
	}
	if o.Nodes == 0 {
		gpus := Pods(o.Gangs, o.MaxGangSize)
		o.Nodes = (gpus*9/8 + gpusPerNode - 1) / gpusPerNode
	}
	if o.SchedulerQPS == 0 {
		o.SchedulerQPS = 500
	}
	if o.PhaseTimeout == 0 {
		o.PhaseTimeout = 10 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.ProfileSeconds == 0 {
		o.ProfileSeconds = 30
	}
}

func (o *Options) validate() error {
	switch {
	case o.Gangs < 1:
		return fmt.Errorf("gangs must be at least 1, not %d", o.Gangs)
	case o.MaxGangSize < 1:
		return fmt.Errorf("the largest gang must have at least 1 pod, not %d", o.MaxGangSize)
	case !slices.Contains(Shapes, o.Shape):
		return fmt.Errorf("shape %q is none of %v", o.Shape, Shapes)
	case o.Window < 0:
		return fmt.Errorf("the arrival window must not be negative, not %s", o.Window)
	case o.Nodes*gpusPerNode < Pods(o.Gangs, o.MaxGangSize):
		return fmt.Errorf("%d nodes hold %d GPUs, fewer than the %d pods need: the scenario runs on free capacity",
			o.Nodes, o.Nodes*gpusPerNode, Pods(o.Gangs, o.MaxGangSize))
	}
	return nil
}

// Shape is what one of the burst's gangs is.
type Shape string

const (
	// ShapePods makes gang i a group of GangSize(i) plain pods, created by
	// the load: LeaderWorkerSet-shaped, without an operator's latency in
	// either run. Through berth they are a pod group.
	ShapePods Shape = "pods"
	// ShapeDeployments makes gang i a Deployment of GangSize(i) one-GPU
	// replicas, created with none before the run; its arrival is its
	// scale-up through the scale subresource, as a HorizontalPodAutoscaler
	// scales it, and kube-controller-manager's ReplicaSet controller
	// creates the pods. Through berth the Deployment carries the queue
	// label and berth admits it replica by replica.
	ShapeDeployments Shape = "deployments"
	// ShapeLeaderWorkerSets makes gang i a LeaderWorkerSet replica of
	// GangSize(i) pods (a leader and its workers), run by the
	// LeaderWorkerSet operator: the set is created with no replicas before
	// the run and scaled to one. Through berth the set carries the queue
	// label and the replica is one gang.
	ShapeLeaderWorkerSets Shape = "leaderworkersets"
)

// Shapes are the shapes a burst can take.
var Shapes = []Shape{ShapePods, ShapeDeployments, ShapeLeaderWorkerSets}

// gpusPerNode is the GPUs of each kwok node (controlplane.GPUNode).
const gpusPerNode = 8

// GangSize is the number of pods of gang i.
func GangSize(i, maxSize int) int { return 1 + i%maxSize }

// Pods is the number of pods of n gangs of at most maxSize pods.
func Pods(n, maxSize int) int {
	total := 0
	for i := range n {
		total += GangSize(i, maxSize)
	}
	return total
}

// Run starts the full plane, runs the floor and then the berth run on it,
// and stops the plane again. A partial report is returned with the error
// when a run fails after the plane started.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	env, err := startPlane(ctx, o)
	if err != nil {
		return nil, err
	}
	rep := &Report{Gangs: o.Gangs, Shape: o.Shape, Pods: Pods(o.Gangs, o.MaxGangSize), Nodes: o.Nodes,
		Window: o.Window.Seconds(), SchedulerQPS: o.SchedulerQPS,
		JobWorkers: o.JobWorkers, ApplyWorkers: o.ApplyWorkers}
	err = run(ctx, env, o, rep)
	return rep, errors.Join(err, env.Stop())
}

// startPlane starts the full plane, with the LeaderWorkerSet operator for
// that shape. kube-controller-manager gets the scheduler's client limit:
// in the Deployment and LeaderWorkerSet shapes its ReplicaSet and
// StatefulSet controllers create every pod. Their workers stay at the
// default five each, as in most clusters, so a webhook's round trip on
// each create shows as it would there.
func startPlane(ctx context.Context, o Options) (*framework.Env, error) {
	limits := []string{"--kube-api-qps=" + strconv.Itoa(o.SchedulerQPS), "--kube-api-burst=" + strconv.Itoa(2*o.SchedulerQPS)}
	var crds []string
	if o.Shape == ShapeLeaderWorkerSets {
		paths, err := framework.OperatorCRDs(ctx, framework.LWSOperator)
		if err != nil {
			return nil, err
		}
		crds = paths
	}
	fmt.Fprintf(o.Progress, "starting the full plane with %d nodes\n", o.Nodes)
	env, err := framework.StartWith(ctx, framework.StartOptions{Full: true, CRDPaths: crds,
		ExtraArgs: map[controlplane.Component][]string{controlplane.KubeScheduler: limits, controlplane.KubeControllerManager: limits}})
	if err != nil {
		return nil, err
	}
	if o.Shape == ShapeLeaderWorkerSets {
		if err := env.StartOperator(ctx, framework.LWSOperator); err != nil {
			return nil, errors.Join(err, env.Stop())
		}
	}
	return env, nil
}

func run(ctx context.Context, env *framework.Env, o Options, rep *Report) error {
	if err := createNodes(ctx, env, o.Nodes); err != nil {
		return err
	}
	// The creator's own client must never be what throttles arrivals.
	cfg := rest.CopyConfig(env.Plane.Config)
	cfg.QPS, cfg.Burst = 5000, 5000
	load, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return fmt.Errorf("creating the load's client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the load's dynamic client: %w", err)
	}
	p := &phaser{env: env, cfg: cfg, o: o, writes: &framework.WriteCounter{}, load: load, dynamic: dyn}

	fmt.Fprintln(o.Progress, "floor: the pods with kube-scheduler alone")
	floor, err := p.run(ctx, "burst-floor", false)
	rep.Floor = floor
	if err != nil {
		return fmt.Errorf("floor run: %w", err)
	}
	if _, err := env.StartBerth(framework.BerthOptions{WrapTransport: p.writes.Wrap,
		Setup: setup.Options{JobWorkers: o.JobWorkers, ApplyWorkers: o.ApplyWorkers}}); err != nil {
		return fmt.Errorf("starting berth: %w", err)
	}
	fmt.Fprintln(o.Progress, "berth, webhook path: the same pods in a LocalQueue, gated by berth's pod webhook")
	through, err := p.run(ctx, "burst-berth", true)
	rep.Berth = through
	if err != nil {
		return fmt.Errorf("berth run: %w", err)
	}
	// The next run starts on a quiet plane: the pods and the Workloads of
	// this one gone.
	if err := emptyNamespace(ctx, env.Client, "burst-berth", o.DeletePage, o.Shape); err != nil {
		return err
	}
	if err := waitNoWorkloads(ctx, env.Client, "burst-berth"); err != nil {
		return err
	}
	if err := framework.InstallPodPolicies(ctx, env.Client); err != nil {
		return err
	}
	if err := framework.WaitForPodGatePolicy(ctx, env.Client, "default"); err != nil {
		return err
	}
	fmt.Fprintln(o.Progress, "berth, policy path: the same pods, gated and checked inside the API server by berth's admission policies")
	policy, err := p.run(ctx, "burst-policy", true)
	rep.Policy = &policy
	if err != nil {
		return fmt.Errorf("berth run on the policy path: %w", err)
	}
	if rep.Floor.P95 > 0 {
		rep.P95Ratio = rep.Berth.P95 / rep.Floor.P95
		rep.PolicyP95Ratio = policy.P95 / rep.Floor.P95
	}
	if floor := rep.Floor.CPUSeconds[APIServer]; floor > 0 {
		rep.APIServerCPURatio = rep.Berth.CPUSeconds[APIServer] / floor
		rep.PolicyAPIServerCPURatio = policy.CPUSeconds[APIServer] / floor
	}
	return nil
}

// createNodes creates the nodes concurrently and waits until all are Ready.
func createNodes(ctx context.Context, env *framework.Env, n int) error {
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			node := controlplane.GPUNode(fmt.Sprintf("h200-%d", i), gpusPerNode, nil)
			if err := env.Client.Create(ctx, node); err != nil {
				errs <- fmt.Errorf("creating node %s: %w", node.Name, err)
				return
			}
			errs <- nil
		}()
	}
	var all []error
	for range n {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	for i := range n {
		if err := controlplane.WaitForNodeReady(ctx, env.Client, fmt.Sprintf("h200-%d", i)); err != nil {
			return fmt.Errorf("waiting for node h200-%d: %w", i, err)
		}
	}
	return nil
}

// createQueues gives namespace ns a LocalQueue "team" in a ClusterQueue
// whose GPU quota covers every node.
func createQueues(ctx context.Context, env *framework.Env, ns string, gpus int) error {
	flavor := builders.Flavor(ns, nil)
	cq := builders.ClusterQueue(ns).Quota(flavor.Name, builders.GPU, resource.NewQuantity(int64(gpus), resource.DecimalSI).String(), "").Obj()
	if err := env.Client.Create(ctx, flavor); err != nil {
		return fmt.Errorf("creating ResourceFlavor: %w", err)
	}
	if err := env.Client.Create(ctx, cq); err != nil {
		return fmt.Errorf("creating ClusterQueue: %w", err)
	}
	if err := env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns)); err != nil {
		return fmt.Errorf("creating LocalQueue: %w", err)
	}
	return nil
}
