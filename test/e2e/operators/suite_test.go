// Package operators_test runs berth beside the real JobSet and
// LeaderWorkerSet operators on the full plane (apiserver, etcd,
// controller-manager, scheduler, kwok GPU nodes): child Jobs and pods are
// created by the operators themselves, built by test/tools/build.sh from
// their Go modules at the versions berth supports.
package operators_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	berthsetup "github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

const (
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
	// held is how long a spec watches a gang stay held.
	held = 3 * time.Second
	// productLabel selects the H200 nodes; the suite's flavors use it.
	productLabel = "nvidia.com/gpu.product"
	product      = "NVIDIA-H200"
)

var env *framework.Env

func TestOperators(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "operators e2e suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	// Two 8-GPU nodes: room for two 8-GPU gangs at once, so only berth's
	// quota can make them wait. kube-scheduler's gang scheduling is on and
	// berth hands it every gang (--pod-groups), as in the e2e suite.
	env, err = framework.StartGPUPlane(ctx, framework.GPUPlane{
		Nodes: 2, NodeLabels: map[string]string{productLabel: product},
		Operators: []framework.Operator{framework.JobSetOperator, framework.LWSOperator},
		ExtraArgs: framework.GenericWorkloadArgs(), Berth: framework.BerthOptions{Setup: berthsetup.Options{PodGroups: true}},
	})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(framework.OperatorPlaneTimeout))

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// setup creates a namespace with a flavor for the H200 nodes, a
// ClusterQueue with 8 GPUs of it and a LocalQueue "team". Every spec that
// calls it shares the two H200 nodes, so setup also registers, as the
// spec's last cleanup, the deletion of every pod owner of the namespace
// and a wait until its pods are gone: a replica left running would hold
// GPUs of both nodes and split the free room, and kube-scheduler, which
// places a gang's pods one by one, could then find no node for the next
// spec's 4-GPU pod while 8 GPUs are free.
func setup(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-e2e-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(env.CleanNamespace(ctx, ns.Name, framework.CleanOptions{Owners: framework.AllOwners(), Timeout: timeout})).To(Succeed())
	}, NodeTimeout(2*timeout))
	Expect(env.Client.Create(ctx, builders.Flavor(ns.Name, map[string]string{productLabel: product}))).To(Succeed())
	Expect(env.Client.Create(ctx, builders.ClusterQueue(ns.Name).Quota(ns.Name, builders.GPU, "8", "").Obj())).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns.Name, "team", ns.Name))).To(Succeed())
	return ns.Name
}

// podsWith lists the pods of the namespace with the labels.
func podsWith(ctx context.Context, g Gomega, ns string, labels map[string]string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
	return pods.Items
}

// workloadsOf lists the Workloads controlled by the object.
func workloadsOf(ctx context.Context, g Gomega, obj client.Object) []berthv1.Workload {
	wls, err := jobsuite.WorkloadsOf(ctx, env.Client, obj)
	g.Expect(err).NotTo(HaveOccurred())
	return wls
}
