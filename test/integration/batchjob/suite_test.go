// Package batchjob_test runs the batch/v1 Job adapter against a real
// kube-apiserver and etcd: the shared adapter suite, Indexed Jobs, changes
// of parallelism, priority and DRA claims. There is no
// kube-controller-manager here: the adapter marks Jobs finished as the Job
// controller would.
package batchjob_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/batchjob"
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

func TestBatchJob(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "batch Job integration suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = framework.StartWithBerth(ctx, framework.StartOptions{}, framework.BerthOptions{Setup: setup.Options{
		DeviceClasses: jobs.DeviceClassMapping{gpuClass: {Resource: builders.GPU, PerDevice: resource.MustParse("1")}},
	}})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

var _ = jobsuite.DescribeAdapter(func() *framework.Env { return env }, adapter{})

// adapter drives Jobs of two pods with 4 GPUs each.
type adapter struct{}

func (adapter) Kind() string { return "batch Job" }

func (adapter) PodSets() []string { return []string{batchjob.PodSetName} }

func (adapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	job := builders.Job(namespace, name, queue).Pods(2).Request(builders.GPU, "4").Obj()
	return job, c.Create(ctx, job)
}

func (adapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	job := builders.Job(namespace, name, queue).Pods(0).Obj()
	return job, "runs no pods", c.Create(ctx, job)
}

func (adapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	job := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), job); err != nil {
		return false, nil, err
	}
	return !ptr.Deref(job.Spec.Suspend, false), map[string]map[string]string{batchjob.PodSetName: job.Spec.Template.Spec.NodeSelector}, nil
}

func (adapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	return finishJob(ctx, c, obj)
}

func (adapter) Finishes() bool { return true }

func (adapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

func (adapter) Requeues() bool { return true }

// finishJob marks a Job complete as the Job controller does: the API
// requires start and completion times and SuccessCriteriaMet first.
func finishJob(ctx context.Context, c client.Client, obj client.Object) error {
	job := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), job); err != nil {
		return err
	}
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.CompletionTime = &now
	job.Status.Succeeded = ptr.Deref(job.Spec.Completions, 1)
	job.Status.Conditions = append(job.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now})
	return c.Status().Update(ctx, job)
}

// newNamespace creates a namespace with a flavor, a ClusterQueue of 8 GPUs
// and a LocalQueue "team".
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	f := builders.Flavor(ns.Name, map[string]string{"nvidia.com/gpu.product": ns.Name})
	Expect(env.Client.Create(ctx, f)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.ClusterQueue(ns.Name).Quota(f.Name, builders.GPU, "8", "").Obj())).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns.Name, "team", ns.Name))).To(Succeed())
	return ns.Name
}
