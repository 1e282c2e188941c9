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
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/controlplane"
	"github.com/berth-dev/berth/test/framework"
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
	var crds []string
	for _, o := range []framework.Operator{framework.JobSetOperator, framework.LWSOperator} {
		crd, err := framework.OperatorCRD(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		crds = append(crds, crd)
	}
	var err error
	env, err = framework.StartWith(ctx, framework.StartOptions{Full: true, CRDPaths: crds})
	Expect(err).NotTo(HaveOccurred())
	for i := range 2 {
		node := controlplane.GPUNode(fmt.Sprintf("h200-%d", i), 8, map[string]string{productLabel: product})
		Expect(env.Client.Create(ctx, node)).To(Succeed())
		Expect(controlplane.WaitForNodeReady(ctx, env.Client, node.Name)).To(Succeed())
	}
	for _, o := range []framework.Operator{framework.JobSetOperator, framework.LWSOperator} {
		Expect(env.StartOperator(ctx, o)).To(Succeed(), "starting the %s operator", o.Name)
	}
	_, err = env.StartBerth(framework.BerthOptions{})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// space is one spec's namespace, with a flavor, a ClusterQueue of
// quotaGPUs GPUs and a LocalQueue "team" (all named after the namespace
// where cluster-scoped), priority classes "<ns>-low" and "<ns>-high", and a
// recorder of the invariants.
type space struct {
	ns  string
	rec *recorder
}

// newSpace creates a space. When the spec ends, the recorder's violations
// are checked, and every workload object, then every pod, of the namespace
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
		builders.Flavor(ns, map[string]string{productLabel: product}), cq, builders.LocalQueue(ns, "team", ns),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-low"}, Value: 10},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}, Value: 1000},
	} {
		Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	rec, err := startRecorder(ctx, env, ns, quotaGPUs)
	Expect(err).NotTo(HaveOccurred())
	s := &space{ns: ns, rec: rec}
	DeferCleanup(func(ctx SpecContext) {
		rec.stop()
		Expect(rec.violations()).To(BeEmpty(), "invariants held throughout the spec")
		s.cleanup(ctx)
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

// cleanup deletes the namespace's jobs of every kind (the owners first, or
// their controllers would replace the pods), lets lingering pods go, and
// waits until no pod is left.
func (s *space) cleanup(ctx context.Context) {
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for _, o := range []client.Object{&jobsetv1.JobSet{}, &lwsv1.LeaderWorkerSet{}, &appsv1.StatefulSet{}, &batchv1.Job{}} {
		Expect(client.IgnoreNotFound(env.Client.DeleteAllOf(ctx, o, client.InNamespace(s.ns), bg))).To(Succeed())
	}
	Expect(client.IgnoreNotFound(env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(s.ns), client.GracePeriodSeconds(0)))).To(Succeed())
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(s.ns))).To(Succeed())
		for i := range pods.Items {
			release(ctx, g, &pods.Items[i])
		}
		g.Expect(pods.Items).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
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
	for _, wl := range s.workloads(ctx, g) {
		if ref := metav1.GetControllerOf(&wl); ref != nil && string(ref.UID) == uid {
			return &wl
		}
	}
	g.Expect(fmt.Errorf("no Workload controlled by %s", uid)).NotTo(HaveOccurred())
	return nil
}

// settled checks that the namespace's ClusterQueue counts exactly the
// Workloads that hold its quota and that every Workload left has a live
// owner: quota released once, nothing leaked, nothing orphaned.
func (s *space) settled(ctx context.Context) {
	Eventually(func(g Gomega) {
		var admitted, gpus int64
		for _, wl := range s.workloads(ctx, g) {
			g.Expect(wl.OwnerReferences).NotTo(BeEmpty(), "Workload %s has an owner", wl.Name)
			for _, ref := range wl.OwnerReferences {
				g.Expect(ownerExists(ctx, s.ns, ref)).To(BeTrue(), "Workload %s: owner %s %s exists", wl.Name, ref.Kind, ref.Name)
			}
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
