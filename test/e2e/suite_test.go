// Package e2e_test runs berth on a full control plane — kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler and kwok GPU nodes — so
// admitted Jobs really get pods, are bound by kube-scheduler and run to
// completion.
package e2e_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

const (
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
	// productLabel selects the H200 nodes; the h200 flavor uses it.
	productLabel = "nvidia.com/gpu.product"
	product      = "NVIDIA-H200"
)

var env *framework.Env

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "e2e suite")
}

// berthOptions are how the suite runs berth, also when a spec restarts it:
// a restart with other options would hand later specs' gangs off
// differently.
var berthOptions = framework.BerthOptions{Setup: setup.Options{PodGroups: true}, WrapTransport: berthWrites.Wrap}

// berthWrites counts every write berth sends, across restarts.
var berthWrites = &framework.WriteCounter{}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	// Two 8-GPU nodes: room for two 8-GPU jobs at once, so only berth's
	// quota can make them run one after the other. kube-scheduler's gang
	// scheduling is on and berth hands it every gang (--pod-groups): every
	// spec's gangs of two or more pods are bound through a PodGroup. With
	// WorkloadWithJob on too, a Job's group is the one the Job controller
	// makes from the gang berth asks for in its spec.scheduling; the
	// operators suite runs without it, where berth makes the groups itself.
	env, err = framework.StartGPUPlane(ctx, framework.GPUPlane{Nodes: 2, NodeLabels: map[string]string{productLabel: product},
		ExtraArgs: framework.GenericWorkloadArgs("WorkloadWithJob"), Berth: berthOptions,
		// The API server gates queued pods; with the hand-off on, the pod
		// webhook still names their PodGroups (package podgate).
		PodPolicies: true})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace for one spec. The specs share two
// nodes and run in random order, so when the spec ends its pods are
// deleted and waited for: a pod left running would hold GPUs that the
// next spec's jobs need.
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-e2e-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(env.CleanNamespace(ctx, ns.Name, framework.CleanOptions{Timeout: timeout})).To(Succeed())
	}, NodeTimeout(2*timeout))
	return ns.Name
}

func getJob(ctx context.Context, g Gomega, job *batchv1.Job) *batchv1.Job {
	fresh := &batchv1.Job{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), fresh)).To(Succeed())
	return fresh
}

func complete(ctx context.Context, job *batchv1.Job) func(Gomega) {
	return func(g Gomega) {
		fresh := getJob(ctx, g, job)
		g.Expect(fresh.Status.Conditions).To(ContainElement(And(
			HaveField("Type", batchv1.JobComplete), HaveField("Status", corev1.ConditionTrue))))
	}
}

func podsOf(ctx context.Context, g Gomega, job *batchv1.Job) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	return pods.Items
}

func workloadOf(ctx context.Context, g Gomega, job *batchv1.Job) *berthv1.Workload {
	wls, err := jobsuite.WorkloadsOf(ctx, env.Client, job)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wls).To(HaveLen(1), "the Workload of Job %s", job.Name)
	return &wls[0]
}

// events lists "Reason: note" of the events about the named object.
func events(ctx context.Context, g Gomega, namespace, name string) []string {
	return jobsuite.EventReasons(ctx, env.Client, namespace, name)(g)
}
