// Package provisioning_test runs berth with the stand-in autoscaler on the
// full plane (apiserver, etcd, controller-manager, scheduler, kwok): gangs
// that must run in one rack get capacity booked — and, where needed,
// created — in one rack through ProvisioningRequests, and a monitor checks
// throughout every spec that no pod is bound before its gang is admitted
// and that no admitted gang runs partly for long.
package provisioning_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/cmd/berth-autoscaler/autoscaler"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

const (
	timeout  = 2 * time.Minute
	interval = 200 * time.Millisecond
	// held is how long a spec watches a gang stay held.
	held = 2 * time.Second
	// bookingTTL is the stand-in's booking time: long enough for a booked
	// gang's pods to bind on a loaded 2-core CI machine (the new nodes join,
	// lose the not-ready taint, then kube-scheduler binds; 10 s was once
	// too short there, and the expired booking evicted a gang that was
	// about to bind), short enough for spec (c) to outwait it.
	bookingTTL = 30 * time.Second
	// notFoundBound is the flavors' capacityNotFoundSeconds: how long berth
	// lets the autoscaler look for capacity in one rack before it tries
	// another.
	notFoundBound = 5
	// partialGrace is how long an admitted gang may run with only part of
	// its pods bound before the monitor calls it a partial gang. A gang
	// placed on an existing node and a booked one starts one pod at once
	// and the other once its node has joined, lost the not-ready taint and
	// kube-scheduler's backoff for the pod (up to 10 s) has run out; on CI's
	// 2-core machine, with a second plane running beside this one, that
	// took more than 20 s once. A gang left partial by a wrong admission
	// stays partial, and every spec also waits for its jobs to complete.
	partialGrace = 45 * time.Second

	zoneLabel = "topology.kubernetes.io/zone"
	rackLabel = "example.com/rack"
	poolLabel = "example.com/pool"
)

var (
	env           *framework.Env
	stopAutoscale func() error
	mon           *monitor
	// autoscalerOptions make the stand-in answer as cluster-autoscaler does
	// (no capacity is CapacityIsNotFound, retried, never Failed;
	// Provisioned before the nodes join; one node group per scale-up; one
	// request per loop), on shorter timings; revocation,
	// which the real one never does, is allowed for the spec that injects
	// it.
	autoscalerOptions = autoscaler.Options{
		Clock: clock.RealClock{}, RetryInterval: 500 * time.Millisecond, RetryBackoff: time.Second, MaxRetryBackoff: 4 * time.Second,
		BookingTTL: bookingTTL, ProvisioningLatency: time.Second, ScanInterval: 500 * time.Millisecond, AllowRevocation: true,
		CapacityBufferController: true, CapacityBufferPodInjection: true,
	}
)

func TestProvisioning(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "provisioning e2e suite")
}

// berthOptions are the options of the suite's berth, also when a spec
// restarts it.
func berthOptions() framework.BerthOptions {
	return framework.BerthOptions{Setup: setup.Options{
		// Devices of draClass count as GPUs (dra_test.go).
		DeviceClasses: jobs.DeviceClassMapping{draClass: {Resource: controlplane.GPUResource, PerDevice: resource.MustParse("1")}},
	}}
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	// With cluster-autoscaler's CapacityBuffer API, which berth keeps
	// headroom through (headroom_test.go); berth finds it at start.
	env, err = framework.StartWithProvisioning(ctx, framework.StartOptions{Full: true, CRDPaths: []string{framework.CapacityBufferCRD()}})
	Expect(err).NotTo(HaveOccurred())
	_, err = env.StartBerth(berthOptions())
	Expect(err).NotTo(HaveOccurred())
	stopAutoscale, err = env.StartAutoscaler(ctx, autoscalerOptions)
	Expect(err).NotTo(HaveOccurred())
	mon = startMonitor(env.Client)
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func() {
	var errs []error
	if mon != nil {
		mon.stop()
	}
	if stopAutoscale != nil {
		errs = append(errs, stopAutoscale())
	}
	if env != nil {
		errs = append(errs, env.Stop())
	}
	Expect(errors.Join(errs...)).NotTo(HaveOccurred())
})

// Every spec ends with the monitor's verdict on everything that ran.
var _ = AfterEach(func() {
	Expect(mon.violations()).To(BeEmpty(), "no pod bound before admission, no partial gang")
})

// rackSetup creates, for one spec, a namespace, a flavor with levels zone
// and rack that books capacity IfNeeded, a ClusterQueue with 64 GPUs of it
// and a LocalQueue "team"; one Ready 8-GPU node per entry of nodes (rack
// name per node) and a CapacityPool of 8-GPU nodes, up to maxNodes, per
// rack in pools. Names are prefixed with the namespace.
func rackSetup(ctx context.Context, nodes []string, pools map[string]int32) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-e2e-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	name := ns.Name
	rf := &berthv1.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.ResourceFlavorSpec{
			NodeLabels:     map[string]string{poolLabel: name},
			TopologyLevels: []string{zoneLabel, rackLabel},
			Provisioning: &berthv1.ProvisioningPolicy{Mode: berthv1.ProvisioningIfNeeded, MaxAttempts: 5, BackoffSeconds: 1,
				CapacityNotFoundSeconds: notFoundBound},
		},
	}
	Expect(env.Client.Create(ctx, rf)).To(Succeed())
	cq := &berthv1.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: berthv1.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}, ResourceGroups: []berthv1.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{controlplane.GPUResource},
			Flavors: []berthv1.FlavorQuotas{{Name: name, Resources: []berthv1.ResourceQuota{
				{Name: controlplane.GPUResource, NominalQuota: resource.MustParse("64")}}}},
		}}},
	}
	Expect(env.Client.Create(ctx, cq)).To(Succeed())
	Expect(env.Client.Create(ctx, &berthv1.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "team"},
		Spec: berthv1.LocalQueueSpec{ClusterQueue: name, PriorityClasses: []string{name + "-low", name + "-high"}}})).To(Succeed())
	for i, rack := range nodes {
		addNode(ctx, fmt.Sprintf("%s-%s-n%d", name, rack, i), rackLabels(name, rack))
	}
	for rack, maxNodes := range pools {
		addPool(ctx, name, rack, maxNodes, nil)
	}
	return name
}

// addPool creates the CapacityPool "<flavor>-<rack>" of up to maxNodes
// 8-GPU nodes of the flavor in rack, whose nodes also carry extra labels;
// it and its nodes are deleted after the spec.
func addPool(ctx context.Context, flavor, rack string, maxNodes int32, extra map[string]string) {
	addPoolWith(ctx, flavor, rack, maxNodes, extra, nil)
}

// addPoolWith is addPool whose template also carries taints, which every
// node the autoscaler creates from it carries.
func addPoolWith(ctx context.Context, flavor, rack string, maxNodes int32, extra map[string]string, taints []corev1.Taint) {
	labels := rackLabels(flavor, rack)
	maps.Copy(labels, extra)
	labels[berthv1.CapacityPoolLabel] = flavor + "-" + rack
	template := controlplane.GPUNode("template", 8, nil)
	pool := &berthv1.CapacityPool{
		ObjectMeta: metav1.ObjectMeta{Name: flavor + "-" + rack},
		Spec: berthv1.CapacityPoolSpec{Flavor: flavor, MaxNodes: maxNodes, NodeTemplate: berthv1.NodeTemplate{
			Labels: labels, Allocatable: template.Status.Allocatable, Taints: taints,
		}},
	}
	Expect(env.Client.Create(ctx, pool)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, pool)) })
	DeferCleanup(deleteNodesOf, pool.Name)
}

func rackLabels(flavor, rack string) map[string]string {
	return map[string]string{poolLabel: flavor, zoneLabel: "zone-a", rackLabel: rack}
}

// addNode creates a Ready kwok node with 8 GPUs, deleted after the spec.
func addNode(ctx context.Context, name string, labels map[string]string, taints ...corev1.Taint) {
	node := controlplane.GPUNode(name, 8, labels)
	node.Spec.Taints = taints
	Expect(env.Client.Create(ctx, node)).To(Succeed())
	DeferCleanup(func(ctx context.Context) error { return client.IgnoreNotFound(env.Client.Delete(ctx, node)) })
	Expect(controlplane.WaitForNodeReady(ctx, env.Client, name)).To(Succeed())
}

// deleteNodesOf deletes the nodes the autoscaler created for a pool.
func deleteNodesOf(ctx context.Context, pool string) error {
	return env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{berthv1.CapacityPoolLabel: pool})
}

// gang submits a Job of two 8-GPU pods that must run in one rack, each
// running for runFor once started.
func gang(ctx context.Context, ns, name string, runFor time.Duration) *batchv1.Job {
	return gangOf(ctx, ns, name, 2, runFor)
}

// gangOf submits a Job of pods 8-GPU pods that must run in one rack.
func gangOf(ctx context.Context, ns, name string, pods int32, runFor time.Duration) *batchv1.Job {
	job := gangJob(ns, name, pods, runFor)
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	return job
}

// gangJob is the Job gangOf submits, not yet created.
func gangJob(ns, name string, pods int32, runFor time.Duration) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels:      map[string]string{berthv1.QueueNameLabel: "team"},
			Annotations: map[string]string{berthv1.TopologyRequiredAnnotation: rackLabel}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods), Completions: ptr.To(pods), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: controlplane.RunFor(runFor)},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "train", Image: "registry.invalid/train:latest",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{controlplane.GPUResource: resource.MustParse("8")},
						Limits:   corev1.ResourceList{controlplane.GPUResource: resource.MustParse("8")},
					}}}},
			},
		},
	}
}

// racksOf returns the racks of the nodes the job's two pods are bound to,
// once both are.
func racksOf(ctx context.Context, job *batchv1.Job) func(Gomega) []string {
	const want = 2
	return func(g Gomega) []string {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
		seen := map[string]bool{}
		var racks []string
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			bound++
			node := &corev1.Node{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node)).To(Succeed())
			if r := node.Labels[rackLabel]; !seen[r] {
				seen[r] = true
				racks = append(racks, r)
			}
		}
		g.Expect(bound).To(Equal(want), "pods of %s bound", job.Name)
		return racks
	}
}

// workloadOf returns the job's Workload.
func workloadOf(ctx context.Context, g Gomega, job *batchv1.Job) *berthv1.Workload {
	wls, err := jobsuite.WorkloadsOf(ctx, env.Client, job)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wls).To(HaveLen(1), "the workload of job %s", job.Name)
	return &wls[0]
}

// monitor polls every pod of a Job and every Workload and records, while
// specs run: a pod bound to a node while its gang holds no quota, and an
// admitted gang with only part of its pods bound for longer than
// partialGrace. Polling every 100 ms catches any state that lasts longer;
// a pod bound before admission stays bound until it ends.
type monitor struct {
	c      client.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	found   []string
	partial map[types.UID]time.Time // first seen partly bound
}

func startMonitor(c client.Client) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{c: c, cancel: cancel, done: make(chan struct{}), partial: map[types.UID]time.Time{}}
	go func() {
		defer close(m.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.check(ctx)
			}
		}
	}()
	return m
}

func (m *monitor) stop() { m.cancel(); <-m.done }

// violations returns and clears what the monitor found.
func (m *monitor) violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.found
	m.found = nil
	return out
}

func (m *monitor) check(ctx context.Context) {
	// Pods first: a pod seen bound was bound after its gang was admitted,
	// so the Workload read afterwards still shows the admission — or an
	// eviction that started since, which the check allows.
	pods := &corev1.PodList{}
	wls := &berthv1.WorkloadList{}
	jobs := &batchv1.JobList{}
	if m.c.List(ctx, pods, client.HasLabels{"job-name"}) != nil || m.c.List(ctx, wls) != nil ||
		m.c.List(ctx, jobs) != nil {
		return
	}
	// A Job deleted with Orphan propagation loses its dependents one by
	// one: the garbage collector may strip the Workload's owner reference
	// before its pods', so for a moment a running pod has a Job and no
	// Workload. That is the orphaning the spec asks for, not an admission.
	live := map[types.UID]bool{}
	for i := range jobs.Items {
		if jobs.Items[i].DeletionTimestamp.IsZero() {
			live[jobs.Items[i].UID] = true
		}
	}
	byJob := map[types.UID]*berthv1.Workload{}
	for i := range wls.Items {
		if ref := metav1.GetControllerOf(&wls.Items[i]); ref != nil {
			byJob[ref.UID] = &wls.Items[i]
		}
	}
	bound := map[types.UID]int32{}
	waiting := map[types.UID][]string{} // why each unbound pod waits, by job
	for i := range pods.Items {
		p := &pods.Items[i]
		ref := metav1.GetControllerOf(p)
		if ref != nil && p.Spec.NodeName == "" && p.DeletionTimestamp.IsZero() {
			waiting[ref.UID] = append(waiting[ref.UID], jobsuite.UnboundReason(p))
		}
		if ref == nil || p.Spec.NodeName == "" || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			// It ran: a gang whose pods end one by one is not partial.
			bound[ref.UID]++
			continue
		}
		wl := byJob[ref.UID]
		if wl == nil && !live[ref.UID] {
			continue
		}
		if wl == nil || (!meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted) &&
			!meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionEvicted)) {
			m.record(fmt.Sprintf("pod %s/%s bound to %s while its gang is not admitted (%s)", p.Namespace, p.Name, p.Spec.NodeName, admissionOf(wl)))
			continue
		}
		bound[ref.UID]++
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for job, wl := range byJob {
		var total int32
		for _, ps := range wl.Spec.PodSets {
			total += ps.Count
		}
		if n := bound[job]; n > 0 && n < total && meta.IsStatusConditionTrue(wl.Status.Conditions, berthv1.ConditionAdmitted) {
			first, ok := m.partial[job]
			if !ok {
				m.partial[job] = now
			} else if !first.IsZero() && now.Sub(first) > partialGrace {
				m.found = append(m.found, fmt.Sprintf("gang %s/%s ran with %d of %d pods bound for %s; unbound: %s",
					wl.Namespace, wl.Name, n, total, now.Sub(first).Round(time.Second), strings.Join(waiting[job], "; ")))
				// Reported once: a gang left partial fails the spec it
				// ran in, not every spec after it.
				m.partial[job] = time.Time{}
			}
			continue
		}
		delete(m.partial, job)
	}
}

func (m *monitor) record(v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.found = append(m.found, v)
}

// admissionOf says what a Workload's Admitted condition is, for a report.
func admissionOf(wl *berthv1.Workload) string {
	if wl == nil {
		return "no Workload"
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, berthv1.ConditionAdmitted)
	if c == nil {
		return fmt.Sprintf("Workload %s has no Admitted condition", wl.Name)
	}
	return fmt.Sprintf("Workload %s Admitted=%s %s: %s", wl.Name, c.Status, c.Reason, c.Message)
}
