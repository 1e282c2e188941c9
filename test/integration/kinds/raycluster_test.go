package kinds_test

import (
	"context"
	"maps"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs/raycluster"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// newRayCluster is a labelled RayCluster: a head without GPUs and a worker
// group "workers" of 2 replicas (1 to 4) of 4 GPUs.
func newRayCluster(namespace, name string, autoscaling bool) *rayv1.RayCluster {
	pod := func(gpus string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray", Image: "registry.invalid/ray:latest",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
				Limits:   corev1.ResourceList{builders.GPU: resource.MustParse(gpus)},
			}}}}}
	}
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec: rayv1.RayClusterSpec{EnableInTreeAutoscaling: ptr.To(autoscaling),
			HeadGroupSpec: rayv1.HeadGroupSpec{Template: pod("0"), RayStartParams: map[string]string{}},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "workers", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](1),
				MaxReplicas: ptr.To[int32](4), NumOfHosts: 1, RayStartParams: map[string]string{}, Template: pod("4")}}},
	}
}

// clusterRunning reports whether the RayCluster is released (not
// suspended), playing KubeRay's conditions (playKubeRay).
func clusterRunning(ctx context.Context, rc *rayv1.RayCluster) func() (bool, error) {
	return func() (bool, error) {
		got, err := playKubeRay(ctx, env.Client, rc)
		return got != nil && !ptr.Deref(got.Spec.Suspend, false), err
	}
}

// playKubeRay reads the cluster and sets the conditions KubeRay would:
// RayClusterSuspended once it is suspended, RayClusterProvisioned once it
// runs.
func playKubeRay(ctx context.Context, c client.Client, rc client.Object) (*rayv1.RayCluster, error) {
	got := &rayv1.RayCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		return nil, err
	}
	cond := metav1.Condition{Type: string(rayv1.RayClusterProvisioned), Status: metav1.ConditionTrue, Reason: "AllPodRunningAndReadyFirstTime"}
	if ptr.Deref(got.Spec.Suspend, false) {
		cond = metav1.Condition{Type: string(rayv1.RayClusterSuspended), Status: metav1.ConditionTrue, Reason: "RayClusterSuspended"}
	}
	if meta.IsStatusConditionTrue(got.Status.Conditions, cond.Type) {
		return got, nil
	}
	got.Status.Conditions = nil
	meta.SetStatusCondition(&got.Status.Conditions, cond)
	return got, c.Status().Update(ctx, got)
}

var _ = Describe("RayCluster", func() {
	It("holds a RayCluster until admitted, starts it placed, accepts its pods, and admits the next when it is deleted", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		first := newRayCluster(ns, "first", false)
		Expect(env.Client.Create(ctx, first)).To(Succeed())
		Expect(first.Spec.Suspend).To(HaveValue(BeTrue()), "berth's defaulter holds a queued RayCluster at creation")
		Eventually(clusterRunning(ctx, first), timeout, interval).Should(BeTrue())
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
		Expect(first.Spec.WorkerGroupSpecs[0].Template.Spec.NodeSelector).To(HaveKeyWithValue("example.com/pool", ns))
		By("KubeRay creates the pods of the admitted cluster, with berth's labels from its templates")
		rayGV := rayv1.GroupVersion.String()
		worker := podOf(first, rayGV, "RayCluster", &first.Spec.WorkerGroupSpecs[0].Template)
		Expect(env.Client.Create(ctx, worker)).To(Succeed())

		second := newRayCluster(ns, "second", false)
		Expect(env.Client.Create(ctx, second)).To(Succeed())
		Consistently(clusterRunning(ctx, second), 2*time.Second, interval).Should(BeFalse(), "the queue's 8 GPUs are the first cluster's")
		By("deleting the first cluster, and its pod as the garbage collector would: berth frees the quota once the pod is gone")
		Expect(env.Client.Delete(ctx, first)).To(Succeed())
		Consistently(clusterRunning(ctx, second), 2*time.Second, interval).Should(BeFalse(), "the first cluster's pod still holds its quota")
		Expect(env.Client.Delete(ctx, worker)).To(Succeed())
		Eventually(clusterRunning(ctx, second), timeout, interval).Should(BeTrue())
	})

	It("admits an autoscaling RayCluster at its minimum and holds it there", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		rc := newRayCluster(ns, "elastic", true)
		Expect(env.Client.Create(ctx, rc)).To(Succeed())
		Expect(rc.Spec.WorkerGroupSpecs[0].Replicas).To(HaveValue(Equal(int32(1))), "started at minReplicas")
		Eventually(clusterRunning(ctx, rc), timeout, interval).Should(BeTrue())
		wls, err := jobsuite.WorkloadsOf(ctx, env.Client, rc)
		Expect(err).NotTo(HaveOccurred())
		Expect(wls).To(HaveLen(1))
		Expect(wls[0].Spec.PodSets).To(ContainElement(And(HaveField("Name", "workers"), HaveField("Count", int32(1)))))

		By("the Ray autoscaler, with RayCluster rights in the namespace, asks for three workers")
		autoscaler, err := env.Tenant(ctx, ns, "ray-autoscaler", "edit")
		Expect(err).NotTo(HaveOccurred())
		Expect(autoscaler.Get(ctx, client.ObjectKeyFromObject(rc), rc)).To(Succeed())
		rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3)
		Expect(autoscaler.Update(ctx, rc)).To(MatchError(ContainSubstring(`admitted with 1 pods in worker group "workers"`)))
	})

	It("leaves a queued RayJob's cluster to the RayJob, and keeps it from outgrowing the RayJob's admission", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		rj := newRayJob(ns, "train", "team")
		Expect(env.Client.Create(ctx, rj)).To(Succeed())
		Eventually(func(g Gomega) bool {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rj), rj)).To(Succeed())
			return rj.Spec.Suspend
		}, timeout, interval).Should(BeFalse())
		rj.Status.RayClusterName = "train-q9w8e"
		Expect(env.Client.Status().Update(ctx, rj)).To(Succeed())

		By("KubeRay creates the cluster with the RayJob's labels, the queue label among them")
		meta := rayChild(rj, rj.Status.RayClusterName)
		maps.Copy(meta.Labels, rj.Labels)
		child := &rayv1.RayCluster{ObjectMeta: meta, Spec: *rj.Spec.RayClusterSpec.DeepCopy()}
		Expect(env.Client.Create(ctx, child)).To(Succeed())
		Expect(child.Spec.Suspend).To(BeNil(), "the RayJob's cluster is not held on its own")
		Consistently(func() ([]berthv1.Workload, error) { return jobsuite.WorkloadsOf(ctx, env.Client, child) },
			2*time.Second, interval).Should(BeEmpty())

		By("a tenant with RayCluster rights grows the cluster past the RayJob's three admitted workers")
		tenant, err := env.Tenant(ctx, ns, "ray-scaler", "edit")
		Expect(err).NotTo(HaveOccurred())
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(child), child)).To(Succeed())
		g := &child.Spec.WorkerGroupSpecs[0]
		g.Replicas, g.MaxReplicas = ptr.To[int32](5), ptr.To[int32](5)
		Expect(tenant.Update(ctx, child)).To(MatchError(ContainSubstring(`the RayCluster of RayJob train is admitted with 3 pods in worker group "workers"`)))
	})

	It("admits an autoscaling RayJob at its minimum, and refuses the Ray autoscaler's growth of its cluster", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		rj := newRayJob(ns, "elastic", "team")
		rj.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true)
		rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](1)
		Expect(env.Client.Create(ctx, rj)).To(Succeed())
		Expect(rj.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas).To(HaveValue(Equal(int32(1))), "started at minReplicas")
		Eventually(func(g Gomega) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, rj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wls).To(HaveLen(1))
			g.Expect(wls[0].Spec.PodSets).To(ContainElement(And(HaveField("Name", "workers"), HaveField("Count", int32(1)))))
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rj), rj)).To(Succeed())
			g.Expect(rj.Spec.Suspend).To(BeFalse())
		}, timeout, interval).Should(Succeed())
		rj.Status.RayClusterName = "elastic-m3n4b"
		Expect(env.Client.Status().Update(ctx, rj)).To(Succeed())
		meta := rayChild(rj, rj.Status.RayClusterName)
		maps.Copy(meta.Labels, rj.Labels)
		child := &rayv1.RayCluster{ObjectMeta: meta, Spec: *rj.Spec.RayClusterSpec.DeepCopy()}
		Expect(env.Client.Create(ctx, child)).To(Succeed())

		By("the Ray autoscaler, with RayCluster rights in the namespace, asks the RayJob's cluster for two workers")
		autoscaler, err := env.Tenant(ctx, ns, "ray-autoscaler", "edit")
		Expect(err).NotTo(HaveOccurred())
		Expect(autoscaler.Get(ctx, client.ObjectKeyFromObject(child), child)).To(Succeed())
		child.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
		Expect(autoscaler.Update(ctx, child)).To(MatchError(ContainSubstring(`admitted with 1 pods in worker group "workers" (workload rayjob-elastic-`)))
	})
})

// rayClusterAdapter drives RayClusters of a head without GPUs and two
// 4-GPU workers through the shared adapter specs, playing KubeRay's
// conditions. A RayCluster never finishes and cannot be scaled to zero (its
// head stays): its user ends it by deleting it, which is what Finish does.
type rayClusterAdapter struct{}

func (rayClusterAdapter) Kind() string { return "RayCluster" }

func (rayClusterAdapter) PodSets() []string { return []string{raycluster.HeadPodSet, "workers"} }

func (a rayClusterAdapter) Create(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, error) {
	rc := a.newCluster(namespace, name, queue)
	return rc, c.Create(ctx, rc)
}

func (a rayClusterAdapter) CreateInvalid(ctx context.Context, c client.Client, namespace, name, queue string) (client.Object, string, error) {
	rc := a.newCluster(namespace, name, queue)
	rc.Labels[berthv1.PriorityClassLabel] = "no-such-class"
	return rc, `PriorityClass "no-such-class" does not exist`, c.Create(ctx, rc)
}

// newCluster is newRayCluster with a 2-GPU head and three 2-GPU workers:
// 8 GPUs, every pod set placed on the flavor.
func (rayClusterAdapter) newCluster(namespace, name, queue string) *rayv1.RayCluster {
	rc := newRayCluster(namespace, name, false)
	rc.Labels[berthv1.QueueNameLabel] = queue
	two := corev1.ResourceList{builders.GPU: resource.MustParse("2")}
	for _, t := range []*corev1.PodTemplateSpec{&rc.Spec.HeadGroupSpec.Template, &rc.Spec.WorkerGroupSpecs[0].Template} {
		t.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: two, Limits: two}
	}
	rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3)
	return rc
}

func (rayClusterAdapter) Finishes() bool { return false }

func (rayClusterAdapter) Requeues() bool { return true }

func (rayClusterAdapter) Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Delete(ctx, obj)
}

// Finish deletes the cluster: see rayClusterAdapter.
func (a rayClusterAdapter) Finish(ctx context.Context, c client.Client, obj client.Object) error {
	return a.Delete(ctx, c, obj)
}

func (rayClusterAdapter) State(ctx context.Context, c client.Client, obj client.Object) (bool, map[string]map[string]string, error) {
	rc, err := playKubeRay(ctx, c, obj)
	if err != nil {
		return false, nil, err
	}
	sel := map[string]map[string]string{raycluster.HeadPodSet: rc.Spec.HeadGroupSpec.Template.Spec.NodeSelector}
	for _, wg := range rc.Spec.WorkerGroupSpecs {
		sel[wg.GroupName] = wg.Template.Spec.NodeSelector
	}
	return !ptr.Deref(rc.Spec.Suspend, false), sel, nil
}
