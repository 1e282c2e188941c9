package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/perf/scenario"
)

// berthUser is the identity berth-controller authenticates as, so that the
// API server's audit log tells its requests from the runner's.
const berthUser = "berth-controller"

// LocalQueueName is the LocalQueue every ClusterQueue's namespace has.
const LocalQueueName = "main"

// cluster is a control plane with berth's CRDs, and the runner's client.
type cluster struct {
	plane  *controlplane.Plane
	scheme *k8sruntime.Scheme
	// cfg is the runner's own client configuration: admin, unthrottled,
	// requests counted.
	cfg *rest.Config
	// client is the runner's own client, built from cfg.
	client client.Client
	// requests counts the runner's requests by HTTP method.
	requests *methodCounter
	// auditLog is the API server's audit log of berth's requests; "" when
	// auditing is off.
	auditLog string
}

// startCluster starts an apiserver + etcd plane in dir with berth's CRDs
// and no webhooks (berth runs with --webhook-port=0).
func startCluster(ctx context.Context, binDir, dir string, audit bool) (*cluster, error) {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering Kubernetes types: %w", err)
	}
	if err := berthv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering berth types: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating plane directory: %w", err)
	}
	opts := controlplane.Options{
		BinDir:            binDir,
		Scheme:            scheme,
		CRDDirectoryPaths: []string{filepath.Join(repoRoot(), "config", "crd", "bases")},
		Dir:               dir,
		ExtraArgs:         map[controlplane.Component][]string{},
	}
	c := &cluster{scheme: scheme, requests: &methodCounter{}}
	if audit {
		args, log, err := auditFiles(dir, berthUser)
		if err != nil {
			return nil, err
		}
		opts.ExtraArgs[controlplane.KubeAPIServer] = args
		c.auditLog = log
	}
	var err error
	if c.plane, err = controlplane.Start(ctx, opts); err != nil {
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	c.cfg = rest.CopyConfig(c.plane.Config)
	c.cfg.QPS = -1 // the runner must never be what throttles the run
	c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return c.requests.wrap(rt) })
	if c.client, err = client.New(c.cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, errors.Join(fmt.Errorf("creating client: %w", err), c.plane.Stop())
	}
	return c, nil
}

// berthKubeconfig provisions berth's user (system:masters) and writes its
// kubeconfig into the plane's directory.
func (c *cluster) berthKubeconfig() (string, error) {
	u, err := c.plane.Env.AddUser(envtest.User{Name: berthUser, Groups: []string{"system:masters"}}, c.plane.Config)
	if err != nil {
		return "", fmt.Errorf("adding user %s: %w", berthUser, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("kubeconfig of %s: %w", berthUser, err)
	}
	path := filepath.Join(c.plane.Dir, berthUser+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing kubeconfig of %s: %w", berthUser, err)
	}
	return path, nil
}

// stop stops the plane.
func (c *cluster) stop() error { return c.plane.Stop() }

// setupQueues creates the flavor, one namespace, ClusterQueue and
// LocalQueue per scenario ClusterQueue, a PriorityClass per class priority
// (Jobs carry priority only through one), and the layout's nodes if asked.
func (c *cluster) setupQueues(ctx context.Context, s *scenario.Scenario, preemption string) error {
	rf := &berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: s.Flavor}}
	if l := s.Layout; l != nil {
		rf.Spec.TopologyLevels = []string{l.RackLabel, corev1.LabelHostname}
	}
	if err := c.client.Create(ctx, rf); err != nil {
		return fmt.Errorf("creating ResourceFlavor: %w", err)
	}
	var objs []client.Object
	seen := map[int32]bool{}
	var granted []string // every LocalQueue lets its jobs take every class
	for _, cl := range s.Classes {
		if !seen[cl.Priority] {
			seen[cl.Priority] = true
			objs = append(objs, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: PriorityClassName(cl.Priority)}, Value: cl.Priority})
			granted = append(granted, PriorityClassName(cl.Priority))
		}
	}
	for _, cq := range s.ClusterQueues() {
		objs = append(objs,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cq.Name, Labels: map[string]string{"perf.berth.dev/scenario": s.Name}}},
			clusterQueue(s, cq, preemption),
			&berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: cq.Name, Name: LocalQueueName},
				Spec: berthv1.LocalQueueSpec{ClusterQueue: cq.Name, PriorityClasses: granted}})
	}
	var nodes []*corev1.Node
	if l := s.Layout; l != nil && l.CreateNodes {
		for r := range l.Racks {
			for n := range l.NodesPerRack {
				name := fmt.Sprintf("rack-%02d-node-%03d", r, n)
				node := controlplane.GPUNode(name, l.GPUsPerNode, map[string]string{l.RackLabel: fmt.Sprintf("rack-%02d", r)})
				nodes = append(nodes, node)
				objs = append(objs, node)
			}
		}
	}
	if err := createAll(ctx, c.client, objs, 16); err != nil {
		return err
	}
	return c.readyNodes(ctx, nodes)
}

// readyNodes makes the layout's nodes what a kubelet and the node
// lifecycle controller would, for berth to count their capacity: Ready,
// without the not-ready taint the API server puts on a new Node. No
// kubelet runs here: the workloads' pods are never created.
func (c *cluster) readyNodes(ctx context.Context, nodes []*corev1.Node) error {
	for _, node := range nodes {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fresh := &corev1.Node{}
			if err := c.client.Get(ctx, client.ObjectKeyFromObject(node), fresh); err != nil {
				return err
			}
			if len(fresh.Spec.Taints) > 0 {
				fresh.Spec.Taints = nil
				if err := c.client.Update(ctx, fresh); err != nil {
					return err
				}
			}
			fresh.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
			return c.client.Status().Update(ctx, fresh)
		})
		if err != nil {
			return fmt.Errorf("making node %s Ready: %w", node.Name, err)
		}
	}
	return nil
}

// PriorityClassName names the PriorityClass the runner creates for a
// priority value.
func PriorityClassName(priority int32) string { return fmt.Sprintf("perf-priority-%d", priority) }

// clusterQueue is the ClusterQueue of one scenario queue. preemption
// "never" overrides the scenario's policy.
func clusterQueue(s *scenario.Scenario, cq scenario.ClusterQueue, preemption string) *berthv1.ClusterQueue {
	g := s.Groups[cq.Group]
	fq := berthv1.FlavorQuotas{Name: s.Flavor}
	var covered []corev1.ResourceName
	for _, q := range g.Quota {
		covered = append(covered, q.Resource)
		fq.Resources = append(fq.Resources, berthv1.ResourceQuota{
			Name: q.Resource, NominalQuota: q.Nominal, BorrowingLimit: q.BorrowingLimit, LendingLimit: q.LendingLimit,
		})
	}
	spec := berthv1.ClusterQueueSpec{
		Cohort:            cq.Cohort,
		NamespaceSelector: &metav1.LabelSelector{}, // every namespace the scenario uses
		ResourceGroups:    []berthv1.ResourceGroup{{CoveredResources: covered, Flavors: []berthv1.FlavorQuotas{fq}}},
		QueueingStrategy:  berthv1.QueueingStrategy(g.QueueingStrategy),
	}
	if preemption != PreemptionNever {
		spec.Preemption = berthv1.ClusterQueuePreemption{
			WithinClusterQueue:  berthv1.PreemptionMode(ptr.Deref(nonEmpty(g.Preemption.WithinClusterQueue), "Never")),
			ReclaimWithinCohort: berthv1.PreemptionMode(ptr.Deref(nonEmpty(g.Preemption.ReclaimWithinCohort), "Never")),
		}
	}
	return &berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: cq.Name}, Spec: spec}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// createAll creates objs, namespaces first, with up to workers requests in
// flight.
func createAll(ctx context.Context, c client.Client, objs []client.Object, workers int) error {
	// Namespaces first: everything else may live in one.
	var first, rest []client.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Namespace); ok {
			first = append(first, o)
		} else {
			rest = append(rest, o)
		}
	}
	for _, batch := range [][]client.Object{first, rest} {
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		sem := make(chan struct{}, workers)
		for _, o := range batch {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := c.Create(ctx, o); err != nil {
					err = fmt.Errorf("creating %T %s: %w", o, client.ObjectKeyFromObject(o), err)
					failed.CompareAndSwap(nil, &err)
				}
			})
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			return *err
		}
	}
	return nil
}

// waitQueuesActive waits until berth has written Active=True on every
// ClusterQueue: then its caches are synced and its engine knows every queue.
func (c *cluster) waitQueuesActive(ctx context.Context, want int, berth *berthProcess, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	active := 0
	for {
		cqs := &berthv1.ClusterQueueList{}
		if err := c.client.List(ctx, cqs); err == nil {
			active = 0
			for i := range cqs.Items {
				if meta.IsStatusConditionTrue(cqs.Items[i].Status.Conditions, berthv1.ConditionActive) {
					active++
				}
			}
			if active == want {
				return nil
			}
		}
		if err := berth.Running(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d ClusterQueues Active after %s", active, want, timeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// methodCounter counts HTTP requests by method.
type methodCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (m *methodCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		m.mu.Lock()
		if m.counts == nil {
			m.counts = map[string]int{}
		}
		m.counts[r.Method]++
		m.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// snapshot returns a copy of the counts.
func (m *methodCounter) snapshot() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.counts))
	for k, v := range m.counts {
		out[k] = v
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
