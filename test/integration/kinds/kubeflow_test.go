package kinds_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kftraining "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs"
	"github.com/berth-dev/berth/controllers/jobs/kubeflow"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// kubeflowAdapter drives the training-operator's PyTorchJobs (a master and
// three workers) and MPIJobs (a launcher and three workers), 2 GPUs per
// pod. It plays the training-operator's part in the status: every replica
// active while the job runs, none once it is suspended.
type kubeflowAdapter struct{ kind string }

func (a kubeflowAdapter) Kind() string { return a.kind }

func (a kubeflowAdapter) jobKind() jobs.Kind {
	if a.kind == kftraining.MPIJobKind {
		return kubeflow.MPIJobKind{}
	}
	return kubeflow.PyTorchJobKind{}
}

// leader is the replica type of the job's single leading pod.
func (a kubeflowAdapter) leader() kftraining.ReplicaType {
	if a.kind == kftraining.MPIJobKind {
		return kftraining.MPIJobReplicaTypeLauncher
	}
	return kftraining.PyTorchJobReplicaTypeMaster
}

func (a kubeflowAdapter) PodSets() []string {
	return []string{kubeflow.PodSetName(a.leader()), "worker"}
}

func (a kubeflowAdapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	obj := a.newJob(namespace, name, queue, 3)
	return obj, c.Create(ctx, obj)
}

func (a kubeflowAdapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	obj := a.newJob(namespace, name, queue, 3)
	obj.GetLabels()[berthv1.PriorityClassLabel] = "no-such-class"
	return obj, `PriorityClass "no-such-class" does not exist`, c.Create(ctx, obj)
}

func (kubeflowAdapter) Finishes() bool { return true }

func (kubeflowAdapter) Requeues() bool { return true }

func (kubeflowAdapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// State plays the operator's replica statuses, then reports the job
// started when it is not suspended, with each replica type's selector.
func (a kubeflowAdapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	fresh := a.jobKind().NewObject()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return false, nil, err
	}
	specs, status := a.fields(fresh)
	suspended := a.jobKind().Wrap(fresh).IsSuspended()
	active := !suspended
	if a.jobKind().Wrap(fresh).IsActive() != active {
		status.ReplicaStatuses = map[kftraining.ReplicaType]*kftraining.ReplicaStatus{}
		for t, s := range specs {
			n := int32(0)
			if active {
				n = ptr.Deref(s.Replicas, 1)
			}
			status.ReplicaStatuses[t] = &kftraining.ReplicaStatus{Active: n}
		}
		if err := c.Status().Update(ctx, fresh); err != nil {
			return false, nil, err
		}
	}
	sel := map[string]map[string]string{}
	for t, s := range specs {
		sel[kubeflow.PodSetName(t)] = s.Template.Spec.NodeSelector
	}
	return !suspended, sel, nil
}

// Finish marks the job Succeeded, as the training-operator does.
func (a kubeflowAdapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	fresh := a.jobKind().NewObject()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return err
	}
	_, status := a.fields(fresh)
	status.Conditions = append(status.Conditions, kftraining.JobCondition{Type: kftraining.JobSucceeded, Status: corev1.ConditionTrue,
		Reason: "JobSucceeded", Message: fmt.Sprintf("%s %s successfully completed", a.kind, obj.GetName()), LastUpdateTime: metav1.Now()})
	return c.Status().Update(ctx, fresh)
}

// fields are the replica specs and status of a PyTorchJob or MPIJob.
func (kubeflowAdapter) fields(obj client.Object) (map[kftraining.ReplicaType]*kftraining.ReplicaSpec, *kftraining.JobStatus) {
	if mj, ok := obj.(*kftraining.MPIJob); ok {
		return mj.Spec.MPIReplicaSpecs, &mj.Status
	}
	pj := obj.(*kftraining.PyTorchJob)
	return pj.Spec.PyTorchReplicaSpecs, &pj.Status
}

// newJob builds a labelled job of a leader and workers, 2 GPUs per pod.
func (a kubeflowAdapter) newJob(namespace, name, queue string, workers int32) client.Object {
	replica := func(n int32) *kftraining.ReplicaSpec {
		return &kftraining.ReplicaSpec{Replicas: ptr.To(n), RestartPolicy: kftraining.RestartPolicyNever,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "pytorch", Image: "registry.invalid/train:latest",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{builders.GPU: resource.MustParse("2")},
					Limits:   corev1.ResourceList{builders.GPU: resource.MustParse("2")},
				}}}}}}
	}
	specs := map[kftraining.ReplicaType]*kftraining.ReplicaSpec{a.leader(): replica(1), "Worker": replica(workers)}
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: queue}}
	if a.kind == kftraining.MPIJobKind {
		return &kftraining.MPIJob{ObjectMeta: meta, Spec: kftraining.MPIJobSpec{MPIReplicaSpecs: specs}}
	}
	return &kftraining.PyTorchJob{ObjectMeta: meta, Spec: kftraining.PyTorchJobSpec{PyTorchReplicaSpecs: specs}}
}

var _ = Describe("training-operator jobs", func() {
	It("refuses a tenant's early resume of a queued PyTorchJob, and its unlabelling", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		// Held: the namespace's LocalQueue does not exist.
		tenant, err := env.Tenant(ctx, ns.Name, "pytorch-user", "edit")
		Expect(err).NotTo(HaveOccurred())
		a := kubeflowAdapter{kind: kftraining.PyTorchJobKind}
		pj := a.newJob(ns.Name, "train", "team", 3).(*kftraining.PyTorchJob)
		Expect(tenant.Create(ctx, pj)).To(Succeed())
		Expect(pj.Spec.RunPolicy.Suspend).To(HaveValue(BeTrue()), "berth's defaulter holds a queued PyTorchJob at creation")
		Eventually(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, pj)
			return len(wls), err
		}, timeout, interval).Should(Equal(1))

		pj.Spec.RunPolicy.Suspend = ptr.To(false)
		Expect(tenant.Update(ctx, pj)).To(MatchError(And(ContainSubstring("spec.runPolicy.suspend"), ContainSubstring("berth holds this job until its workload"))))
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(pj), pj)).To(Succeed())
		delete(pj.Labels, berthv1.QueueNameLabel)
		Expect(tenant.Update(ctx, pj)).To(MatchError(ContainSubstring("cannot be removed while berth holds workload")))
		Consistently(func(g Gomega) bool {
			got := &kftraining.PyTorchJob{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pj), got)).To(Succeed())
			return ptr.Deref(got.Spec.RunPolicy.Suspend, false)
		}, 2*time.Second, interval).Should(BeTrue())
	})
})
