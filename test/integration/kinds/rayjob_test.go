package kinds_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs/rayjob"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// rayJobAdapter drives RayJobs of a 2-GPU head and a worker group
// "workers" of three 2-GPU pods, submitted over HTTP (no submitter pod,
// whose CPU the suite's GPU-only queue does not cover). It plays KubeRay's
// part in the RayJob's status: Running once resumed, Suspended once
// suspended (KubeRay deletes the cluster then), Complete when finished.
type rayJobAdapter struct{}

func (rayJobAdapter) Kind() string { return "RayJob" }

func (rayJobAdapter) PodSets() []string { return []string{rayjob.HeadPodSet, "workers"} }

func (rayJobAdapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	rj := newRayJob(namespace, name, queue)
	return rj, c.Create(ctx, rj)
}

func (rayJobAdapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	rj := newRayJob(namespace, name, queue)
	rj.Labels[berthv1.PriorityClassLabel] = "no-such-class"
	return rj, `PriorityClass "no-such-class" does not exist`, c.Create(ctx, rj)
}

func (rayJobAdapter) Finishes() bool { return true }

func (rayJobAdapter) Requeues() bool { return true }

func (rayJobAdapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// State plays KubeRay's status transitions, then reports the RayJob started
// when it is not suspended, with the head's and workers' node selectors.
func (rayJobAdapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	rj := &rayv1.RayJob{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), rj); err != nil {
		return false, nil, err
	}
	want := rj.Status.JobDeploymentStatus
	switch {
	case rj.Spec.Suspend && want != rayv1.JobDeploymentStatusSuspended && want != rayv1.JobDeploymentStatusNew:
		want = rayv1.JobDeploymentStatusSuspended
	case !rj.Spec.Suspend && (want == rayv1.JobDeploymentStatusNew || want == rayv1.JobDeploymentStatusSuspended):
		want = rayv1.JobDeploymentStatusRunning
	}
	if want != rj.Status.JobDeploymentStatus {
		rj.Status.JobDeploymentStatus = want
		if err := c.Status().Update(ctx, rj); err != nil {
			return false, nil, err
		}
	}
	cs := rj.Spec.RayClusterSpec
	sel := map[string]map[string]string{rayjob.HeadPodSet: cs.HeadGroupSpec.Template.Spec.NodeSelector}
	for _, g := range cs.WorkerGroupSpecs {
		sel[g.GroupName] = g.Template.Spec.NodeSelector
	}
	return !rj.Spec.Suspend, sel, nil
}

// Finish marks the RayJob's Ray job succeeded, as KubeRay does.
func (rayJobAdapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	rj := &rayv1.RayJob{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), rj); err != nil {
		return err
	}
	rj.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusComplete
	rj.Status.JobStatus = rayv1.JobStatusSucceeded
	return c.Status().Update(ctx, rj)
}

// newRayJob builds a labelled RayJob of a 2-GPU head and three 2-GPU
// workers.
func newRayJob(namespace, name, queue string) *rayv1.RayJob {
	pod := func(gpus string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray", Image: "registry.invalid/ray:latest",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
				Limits:   corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
			}}}}}
	}
	return &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: queue}},
		Spec: rayv1.RayJobSpec{
			Entrypoint: "python train.py", SubmissionMode: rayv1.HTTPMode, ShutdownAfterJobFinishes: true,
			RayClusterSpec: &rayv1.RayClusterSpec{
				HeadGroupSpec: rayv1.HeadGroupSpec{Template: pod("2"), RayStartParams: map[string]string{}},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "workers", Replicas: ptr.To[int32](3), MinReplicas: ptr.To[int32](0),
					MaxReplicas: ptr.To[int32](3), NumOfHosts: 1, RayStartParams: map[string]string{}, Template: pod("2")}},
			},
		},
	}
}

var _ = Describe("RayJob", func() {
	It("holds the submitter pod of a RayJob in quota and places the template the RayJob declares for it", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		rj := withSubmitter(newRayJob(ns, "train", "team"))
		Expect(env.Client.Create(ctx, rj)).To(Succeed())
		Eventually(func(g Gomega) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, rj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wls).To(HaveLen(1))
			var sets []string
			for _, ps := range wls[0].Spec.PodSets {
				sets = append(sets, ps.Name)
			}
			g.Expect(sets).To(Equal([]string{rayjob.HeadPodSet, "workers", rayjob.SubmitterPodSet}))
			g.Expect(wls[0].Status.Admission).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &rayv1.RayJob{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rj), got)).To(Succeed())
			g.Expect(got.Spec.Suspend).To(BeFalse())
			g.Expect(got.Spec.SubmitterPodTemplate.Spec.NodeSelector).To(HaveKeyWithValue("example.com/pool", ns))
			g.Expect(got.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.NodeSelector).To(HaveKeyWithValue("example.com/pool", ns))
		}, timeout, interval).Should(Succeed())
	})

	It("refuses a tenant's RayJob that berth cannot hold within quota, and a tenant's early resume or unlabelling", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		// Held: the namespace's LocalQueue does not exist.
		tenant, err := env.Tenant(ctx, ns.Name, "ray-user", "edit")
		Expect(err).NotTo(HaveOccurred())

		By("a RayJob that would run on a cluster that is not its own")
		shared := newRayJob(ns.Name, "shared", "team")
		shared.Spec.RayClusterSpec, shared.Spec.ClusterSelector = nil, map[string]string{"ray.io/cluster": "shared"}
		Expect(tenant.Create(ctx, shared)).To(MatchError(ContainSubstring("runs on an existing RayCluster (spec.clusterSelector)")))

		By("a RayJob that keeps its cluster after it ends, which KubeRay cannot suspend")
		kept := newRayJob(ns.Name, "kept", "team")
		kept.Spec.ShutdownAfterJobFinishes = false
		Expect(tenant.Create(ctx, kept)).To(MatchError(ContainSubstring("shutdownAfterJobFinishes is false")))

		By("a queued RayJob is held, and stays held")
		rj := newRayJob(ns.Name, "train", "team")
		Expect(tenant.Create(ctx, rj)).To(Succeed())
		Expect(rj.Spec.Suspend).To(BeTrue(), "berth's defaulter holds a queued RayJob at creation")
		Eventually(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, rj)
			return len(wls), err
		}, timeout, interval).Should(Equal(1))
		rj.Spec.Suspend = false
		Expect(tenant.Update(ctx, rj)).To(MatchError(ContainSubstring("berth holds this job until its workload")))
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(rj), rj)).To(Succeed())
		delete(rj.Labels, berthv1.QueueNameLabel)
		rj.Spec.Suspend = false
		Expect(tenant.Update(ctx, rj)).To(MatchError(ContainSubstring("cannot be removed while berth holds workload")))
		Consistently(func(g Gomega) bool {
			got := &rayv1.RayJob{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rj), got)).To(Succeed())
			return got.Spec.Suspend
		}, 2*time.Second, interval).Should(BeTrue())
	})
})

// operatorEditor is what a platform that installs KubeRay, the
// training-operator, JobSet and Kubeflow Trainer grants its tenants: their
// jobs in their namespaces, and reading the training runtimes (as
// Kubeflow's own roles grant them), aggregated to the built-in edit role. Created before the suite's first
// tenant, whose binding fills edit on a plane without
// kube-controller-manager (framework.Env.Tenant).
func operatorEditor() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "berth-it-operator-editor", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{rayv1.GroupVersion.Group}, Resources: []string{"rayjobs", "rayclusters"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"kubeflow.org"}, Resources: []string{"pytorchjobs", "mpijobs"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"trainer.kubeflow.org"}, Resources: []string{"trainjobs"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"trainer.kubeflow.org"}, Resources: []string{"trainingruntimes", "clustertrainingruntimes"},
				Verbs: []string{"get", "list", "watch"}},
		},
	}
}
