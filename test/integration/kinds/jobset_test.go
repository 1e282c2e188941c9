package kinds_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// jobSetAdapter drives JobSets of two replicated jobs: "driver" (one Job of two
// pods) and "workers" (two Jobs of one pod), 2 GPUs per pod.
type jobSetAdapter struct{}

func (jobSetAdapter) Kind() string { return "JobSet" }

func (jobSetAdapter) PodSets() []string { return []string{"driver", "workers"} }

func (jobSetAdapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	js := newJobSet(namespace, name, queue, 1)
	return js, c.Create(ctx, js)
}

func (jobSetAdapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	js := newJobSet(namespace, name, queue, 0)
	return js, "runs no pods", c.Create(ctx, js)
}

func (jobSetAdapter) Finishes() bool { return true }

func (jobSetAdapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

func (jobSetAdapter) Requeues() bool { return true }

func (jobSetAdapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	js := &jobsetv1.JobSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), js); err != nil {
		return false, nil, err
	}
	sel := map[string]map[string]string{}
	for _, rj := range js.Spec.ReplicatedJobs {
		sel[rj.Name] = rj.Template.Spec.Template.Spec.NodeSelector
	}
	return !ptr.Deref(js.Spec.Suspend, false), sel, nil
}

func (jobSetAdapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	js := &jobsetv1.JobSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), js); err != nil {
		return err
	}
	js.Status.Conditions = append(js.Status.Conditions, metav1.Condition{
		Type: string(jobsetv1.JobSetCompleted), Status: metav1.ConditionTrue, Reason: "AllJobsCompleted",
		Message: "jobset completed successfully", LastTransitionTime: metav1.Now(),
	})
	return c.Status().Update(ctx, js)
}

// newJobSet builds a labelled JobSet; parallelism 0 makes it run no pods.
func newJobSet(namespace, name, queue string, parallelism int32) *jobsetv1.JobSet {
	rj := func(rjName string, replicas, pods int32) jobsetv1.ReplicatedJob {
		return jobsetv1.ReplicatedJob{
			Name:     rjName,
			Replicas: replicas,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Parallelism: ptr.To(pods * parallelism), Completions: ptr.To(pods * parallelism),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/train:latest",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{builders.GPU: resource.MustParse("2")},
							Limits:   corev1.ResourceList{builders.GPU: resource.MustParse("2")},
						}}},
				}},
			}},
		}
	}
	return &jobsetv1.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: queue}},
		Spec: jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{
			rj("driver", 1, 2),
			rj("workers", 2, 1),
		}},
	}
}

var _ = Describe("JobSet children", func() {
	It("does not queue a labelled Job that a JobSet controls: the JobSet's workload covers it", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		js := newJobSet(ns.Name, "parent", "team", 1)
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		child := childJob(ns.Name, js, "parent-workers-0", "workers", "0")
		Expect(env.Client.Create(ctx, child)).To(Succeed())
		Eventually(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, js)
			return len(wls), err
		}, 30*time.Second, 100*time.Millisecond).Should(Equal(1))
		Consistently(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, child)
			return len(wls), err
		}, "2s", 100*time.Millisecond).Should(BeZero())
	})

	It("queues a Job on its own that only points its controller at a JobSet", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		js := newJobSet(ns.Name, "parent", "team", 1)
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		// Labelled as the JobSet controller labels its Jobs, but an index
		// beyond the replicated job's replicas: not one of the JobSet's.
		forged := childJob(ns.Name, js, "parent-workers-5", "workers", "5")
		Expect(env.Client.Create(ctx, forged)).To(Succeed())
		Eventually(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, forged)
			return len(wls), err
		}, 30*time.Second, 100*time.Millisecond).Should(Equal(1), "the forged child must be queued on its own")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(forged), forged)).To(Succeed())
		Expect(forged.Spec.Suspend).To(HaveValue(BeTrue()), "the forged child must stay held until its own workload is admitted")
	})
})

// childJob is a Job labelled and owned as the JobSet controller makes the
// Jobs of js.
func childJob(namespace string, js *jobsetv1.JobSet, name, rj, index string) *batchv1.Job {
	child := builders.Job(namespace, name, "team").Obj()
	child.Labels[jobsetv1.JobSetNameKey] = js.Name
	child.Labels[jobsetv1.ReplicatedJobNameKey] = rj
	child.Labels[jobsetv1.JobIndexKey] = index
	child.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: jobsetv1.SchemeGroupVersion.String(), Kind: "JobSet", Name: js.Name, UID: js.UID, Controller: ptr.To(true),
	}}
	return child
}
