package kinds_test

import (
	"context"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/berth-dev/berth/controllers/jobs/batchjob"
	"github.com/berth-dev/berth/test/builders"
)

// batchJobAdapter drives Jobs of two pods with 4 GPUs each.
type batchJobAdapter struct{}

func (batchJobAdapter) Kind() string { return "batch Job" }

func (batchJobAdapter) PodSets() []string { return []string{batchjob.PodSetName} }

func (batchJobAdapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	job := builders.Job(namespace, name, queue).Pods(2).Request(builders.GPU, "4").Obj()
	return job, c.Create(ctx, job)
}

func (batchJobAdapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	job := builders.Job(namespace, name, queue).Pods(0).Obj()
	return job, "runs no pods", c.Create(ctx, job)
}

func (batchJobAdapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	job := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), job); err != nil {
		return false, nil, err
	}
	return !ptr.Deref(job.Spec.Suspend, false), map[string]map[string]string{batchjob.PodSetName: job.Spec.Template.Spec.NodeSelector}, nil
}

func (batchJobAdapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	return finishJob(ctx, c, obj)
}

func (batchJobAdapter) Finishes() bool { return true }

func (batchJobAdapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

func (batchJobAdapter) Requeues() bool { return true }

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
