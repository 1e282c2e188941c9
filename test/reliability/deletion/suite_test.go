// Package deletion_test is the deletion case of berth's reliability suite:
// on the full plane (apiserver, etcd, controller-manager with its garbage
// collector and namespace controller, kube-scheduler, kwok GPU nodes) and
// beside the real JobSet and LeaderWorkerSet operators, it deletes jobs of
// every kind with every propagation policy — running, waiting for
// capacity and being evicted — and Workloads, queues, flavors and
// namespaces under them, and checks that quota is released exactly once and
// only after the pods are gone, that nothing is admitted twice or runs over
// quota, that nothing is left without a live owner, and that nothing hangs.
package deletion_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
	"github.com/berth-dev/berth/test/oracle"
)

const (
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
	// held is how long a spec watches quota stay held.
	held = time.Second
	// productLabel selects the H200 nodes; each spec's flavor uses it.
	productLabel = "nvidia.com/gpu.product"
	product      = "NVIDIA-H200"
	// quotaGPUs is every spec's ClusterQueue quota: one 8-GPU gang, on two
	// 8-GPU nodes, so only berth's quota keeps a second gang from running.
	quotaGPUs = 8
	// linger is a finalizer the specs put on pods to keep them terminating
	// (as a kubelet does during a grace period) for as long as a spec needs.
	linger = "test.berth.dev/linger"
)

var env *framework.Env

func TestDeletion(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "reliability: deletion")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.StartGPUPlane(ctx, framework.GPUPlane{
		Nodes: 2, NodeLabels: map[string]string{productLabel: product},
		Operators: []framework.Operator{framework.JobSetOperator, framework.LWSOperator},
	})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(framework.OperatorPlaneTimeout))

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// space is one spec's namespace, with a flavor, a ClusterQueue of
// quotaGPUs GPUs and a LocalQueue "team" (all named after the namespace
// where cluster-scoped), priority classes "<ns>-low" and "<ns>-high", and
// the invariant oracle recording it.
type space struct {
	ns  string
	rec *oracle.Recorder
}

// newSpace creates a space. When the spec ends, the oracle's verdict on
// everything the spec did is checked (no double admission, no admission
// while deleting, no quota overshoot by admitted Workloads or bound pods,
// no pod bound outside an admitted Workload), and every workload object, then every pod, of the namespace
// is deleted and waited for: the specs share two nodes and run in random
// order, and a pod left behind would hold GPUs the next spec needs.
func newSpace(ctx context.Context, preempt bool) *space {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-del-"}}
	Expect(env.Client.Create(ctx, nsObj)).To(Succeed())
	ns := nsObj.Name
	cq := builders.ClusterQueue(ns).Quota(ns, builders.GPU, fmt.Sprint(quotaGPUs), "").Obj()
	if preempt {
		cq.Spec.Preemption.WithinClusterQueue = berthv1.PreemptLowerPriority
	}
	for _, o := range []client.Object{
		builders.Flavor(ns, map[string]string{productLabel: product}), cq, builders.LocalQueue(ns, "team", ns, ns+"-low", ns+"-high"),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-low"}, Value: 10},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}, Value: 1000},
	} {
		Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	rec, err := oracle.Start(ctx, env.Plane.Config, oracle.Options{Namespaces: []string{ns}})
	Expect(err).NotTo(HaveOccurred())
	s := &space{ns: ns, rec: rec}
	DeferCleanup(func(ctx SpecContext) {
		violations := rec.Violations()
		rec.Stop()
		Expect(violations).To(BeEmpty(), "invariants held throughout the spec")
		Expect(env.CleanNamespace(ctx, ns, framework.CleanOptions{Owners: framework.AllOwners(), Finalizers: []string{linger}, Timeout: timeout})).To(Succeed())
		for _, o := range []client.Object{
			&berthv1.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&berthv1.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-low"}},
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}},
		} {
			Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o))).To(Succeed())
		}
	}, NodeTimeout(2*timeout))
	return s
}

// release removes the linger finalizer from a pod.
func release(ctx context.Context, g Gomega, pod *corev1.Pod) {
	if !controllerutil.ContainsFinalizer(pod, linger) {
		return
	}
	base := pod.DeepCopy()
	controllerutil.RemoveFinalizer(pod, linger)
	g.Expect(client.IgnoreNotFound(env.Client.Patch(ctx, pod, client.MergeFrom(base)))).To(Succeed())
}

// releaseAll removes the linger finalizer from every pod of the namespace.
func (s *space) releaseAll(ctx context.Context) {
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(s.ns))).To(Succeed())
		for i := range pods.Items {
			release(ctx, g, &pods.Items[i])
		}
	}, timeout, interval).Should(Succeed())
}

// next submits an 8-GPU Job that runs for a second: it can only run once
// the quota of what it waits behind is released.
func (s *space) next(ctx context.Context, name string) *batchv1.Job {
	job := builders.Job(s.ns, name, "team").Request(builders.GPU, "8").PodAnnotations(controlplane.RunFor(time.Second)).Obj()
	Expect(env.Client.Create(ctx, job)).To(Succeed())
	return job
}

// pods lists the namespace's pods with the labels.
func (s *space) pods(ctx context.Context, g Gomega, labels map[string]string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(s.ns), client.MatchingLabels(labels))).To(Succeed())
	return pods.Items
}

// jobPods lists the pods of a batch Job.
func (s *space) jobPods(ctx context.Context, g Gomega, job *batchv1.Job) []corev1.Pod {
	return s.pods(ctx, g, map[string]string{batchv1.JobNameLabel: job.Name})
}

// waits checks that a Job stays suspended without pods for a while.
func (s *space) waits(ctx context.Context, job *batchv1.Job, why string) {
	Consistently(func(g Gomega) {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		g.Expect(fresh.Spec.Suspend).To(HaveValue(BeTrue()), why)
		g.Expect(s.jobPods(ctx, g, job)).To(BeEmpty(), why)
	}, held, interval).Should(Succeed())
}

// starts waits until a Job is admitted and its pod runs.
func (s *space) starts(ctx context.Context, job *batchv1.Job) {
	Eventually(func(g Gomega) {
		pods := s.jobPods(ctx, g, job)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Status.Phase).To(BeElementOf(corev1.PodRunning, corev1.PodSucceeded))
	}, timeout, interval).Should(Succeed())
}

// completes waits until a Job completed.
func (s *space) completes(ctx context.Context, job *batchv1.Job) {
	Eventually(func(g Gomega) {
		fresh := &batchv1.Job{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
		g.Expect(fresh.Status.Conditions).To(ContainElement(And(
			HaveField("Type", batchv1.JobComplete), HaveField("Status", corev1.ConditionTrue))))
	}, timeout, interval).Should(Succeed())
}

// workloads lists the namespace's Workloads.
func (s *space) workloads(ctx context.Context, g Gomega) []berthv1.Workload {
	wls := &berthv1.WorkloadList{}
	g.Expect(env.Client.List(ctx, wls, client.InNamespace(s.ns))).To(Succeed())
	return wls.Items
}

// workloadOf returns the Workload controlled by the object with uid.
func (s *space) workloadOf(ctx context.Context, g Gomega, uid string) *berthv1.Workload {
	owner := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, UID: types.UID(uid)}}
	wls, err := jobsuite.WorkloadsOf(ctx, env.Client, owner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wls).To(HaveLen(1), "the Workload controlled by %s", uid)
	return &wls[0]
}

// settled checks that the namespace's ClusterQueue counts exactly the
// Workloads that hold its quota and that no Workload, PodTemplate or
// ProvisioningRequest is left without a live owner: quota released once,
// nothing leaked, nothing orphaned.
func (s *space) settled(ctx context.Context) {
	Eventually(func(g Gomega) {
		g.Expect(oracle.Orphans(ctx, env.Client, s.ns)).To(BeEmpty())
		var admitted, gpus int64
		for _, wl := range s.workloads(ctx, g) {
			if lifecycle.HoldsQuota(lifecycle.PhaseOf(&wl)) {
				admitted++
				gpus += workloadGPUs(&wl)
			}
		}
		cq := &berthv1.ClusterQueue{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.ns}, cq)).To(Succeed())
		g.Expect(cq.Status.AdmittedWorkloads).To(BeEquivalentTo(admitted))
		g.Expect(usedGPUs(cq)).To(Equal(gpus), "the ClusterQueue's usage is its admitted Workloads'")
	}, timeout, interval).Should(Succeed())
}

// workloadGPUs is the GPUs a Workload's admission holds.
func workloadGPUs(wl *berthv1.Workload) int64 {
	if wl.Status.Admission == nil {
		return 0
	}
	counts := map[string]int32{}
	for _, a := range wl.Status.Admission.PodSetAssignments {
		counts[a.Name] = a.Count
	}
	var n int64
	for _, ps := range wl.Spec.PodSets {
		q := ps.Requests[builders.GPU]
		n += q.Value() * int64(counts[ps.Name])
	}
	return n
}

// usedGPUs is the GPUs a ClusterQueue's status counts as in use.
func usedGPUs(cq *berthv1.ClusterQueue) int64 {
	var n int64
	for _, f := range cq.Status.FlavorsUsage {
		for _, r := range f.Resources {
			if r.Name == builders.GPU {
				n += r.Total.Value()
			}
		}
	}
	return n
}
