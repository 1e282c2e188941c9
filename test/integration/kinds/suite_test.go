// Package kinds_test runs each job kind's adapter — batch/v1 Job, JobSet,
// LeaderWorkerSet, pod group, RayJob, RayCluster, PyTorchJob, MPIJob and
// TrainJob —
// against one real kube-apiserver and etcd with the kinds' CRDs installed:
// the shared adapter suite (test/jobsuite) for each kind, and each kind's
// specifics. Every spec works in a namespace, flavor and ClusterQueue of
// its own, so the kinds share the plane and one berth. There is no
// kube-controller-manager, operator or kubelet here: the adapters play
// them — they mark Jobs and JobSets finished as their controllers would,
// move a RayJob's, a RayCluster's and a training-operator job's status as
// their operators do, build a TrainJob's JobSet as the trainer does, create a LeaderWorkerSet replica's pods (labelled as
// the operator labels them) whenever they are missing, and mark released
// pods Succeeded as a kubelet would.
package kinds_test

import (
	"slices"
	"testing"
	"time"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
	// gpuClass is the DeviceClass the suite maps to nvidia.com/gpu.
	gpuClass = "gpu.nvidia.com"
)

var env *framework.Env

func TestKinds(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "job kinds integration suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	jobSetCRD, err := framework.JobSetCRD()
	Expect(err).NotTo(HaveOccurred())
	lwsCRD, err := framework.LeaderWorkerSetCRD()
	Expect(err).NotTo(HaveOccurred())
	rayCRDs, err := framework.RayCRDs()
	Expect(err).NotTo(HaveOccurred())
	kfCRDs, err := framework.TrainingOperatorCRDs()
	Expect(err).NotTo(HaveOccurred())
	trainerCRDs, err := framework.TrainerCRDs()
	Expect(err).NotTo(HaveOccurred())
	crds := append(append(append([]string{jobSetCRD, lwsCRD}, rayCRDs...), kfCRDs...), trainerCRDs...)
	env, err = framework.StartWithBerth(ctx, framework.StartOptions{CRDPaths: crds}, framework.BerthOptions{Setup: setup.Options{
		DeviceClasses: jobs.DeviceClassMapping{gpuClass: {Resource: builders.GPU, PerDevice: resource.MustParse("1")}},
		// Every kind the suite describes, and capacity: the shared spec
		// that asks for a topology level its flavor lacks reads the
		// flavor's levels, which reach the engine through the capacity
		// controllers.
		// Headroom: with no CapacityBuffer API here, it keeps headroom as
		// placeholder pods (headroom_test.go).
		Parts: []setup.Part{setup.Capacity, setup.Headroom, setup.BatchJob, setup.JobSet, setup.LWS, setup.PodGroup, setup.RayJob, setup.RayCluster,
			setup.PyTorchJob, setup.MPIJob, setup.TrainJob},
	}})
	Expect(err).NotTo(HaveOccurred())
	Expect(env.Client.Create(ctx, operatorEditor())).To(Succeed())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

var (
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, batchJobAdapter{})
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, jobSetAdapter{})
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, lwsAdapter{})
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, podGroupAdapter{})
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, rayJobAdapter{})
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, rayClusterAdapter{})
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, kubeflowAdapter{kind: kftraining.PyTorchJobKind})
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, kubeflowAdapter{kind: kftraining.MPIJobKind})
	_ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, trainJobAdapter{})
)

// gated reports whether berth's admission gate still holds the pod.
func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == berthv1.AdmissionGate })
}
