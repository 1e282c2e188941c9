package kinds_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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

// rayQueue creates a namespace with LocalQueue "team" whose ClusterQueue
// has 8 GPUs and 1 CPU of a flavor of its own, labelled example.com/pool.
func rayQueue(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
	Expect(env.Client.Create(ctx, ns)).To(Succeed())
	f := builders.Flavor(ns.Name, map[string]string{"example.com/pool": ns.Name})
	Expect(env.Client.Create(ctx, f)).To(Succeed())
	cq := builders.ClusterQueue(ns.Name).Quota(f.Name, builders.GPU, "8", "").Obj()
	// A submitter pod asks for CPU: the queue covers it too.
	rg := &cq.Spec.ResourceGroups[0]
	rg.CoveredResources = append(rg.CoveredResources, corev1.ResourceCPU)
	rg.Flavors[0].Resources = append(rg.Flavors[0].Resources, berthv1.ResourceQuota{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("1")})
	Expect(env.Client.Create(ctx, cq)).To(Succeed())
	Expect(env.Client.Create(ctx, builders.LocalQueue(ns.Name, "team", ns.Name))).To(Succeed())
	return ns.Name
}

// withSubmitter makes rj submit through a submitter Job of its own
// template (K8sJobMode), asking for 1 CPU.
func withSubmitter(rj *rayv1.RayJob) *rayv1.RayJob {
	rj.Spec.SubmissionMode = rayv1.K8sJobMode
	rj.Spec.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "submit", Image: "registry.invalid/ray:latest",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	return rj
}

// rayChild is an object of KubeRay's making for rj: owned by it and
// labelled as KubeRay labels what it creates for a RayJob.
func rayChild(rj *rayv1.RayJob, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: rj.Namespace, Name: name,
		Labels: map[string]string{"ray.io/originated-from-cr-name": rj.Name, "ray.io/originated-from-crd": "RayJob"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob", Name: rj.Name,
			UID: rj.UID, Controller: ptr.To(true)}}}
}

// podOf is a pod of template t controlled by owner (of kind, in group
// version gv), as the owner's controller creates it.
func podOf(owner client.Object, gv, kind string, t *corev1.PodTemplateSpec) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), GenerateName: owner.GetName() + "-", Labels: t.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gv, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}},
		Spec: *t.Spec.DeepCopy(),
	}
}

var _ = Describe("RayJob children", func() {
	It("accepts the pods KubeRay creates for an admitted RayJob's cluster and submitter, and refuses those of a cluster it did not make", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		rj := withSubmitter(newRayJob(ns, "train", "team"))
		Expect(env.Client.Create(ctx, rj)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rj), rj)).To(Succeed())
			g.Expect(rj.Spec.Suspend).To(BeFalse())
			g.Expect(rj.Spec.RayClusterSpec.HeadGroupSpec.Template.Labels).To(HaveKey(berthv1.WorkloadLabel))
		}, timeout, interval).Should(Succeed())

		By("KubeRay records the cluster's name, then creates the cluster, the submitter Job and their pods")
		rj.Status.RayClusterName = "train-x7k2p"
		rj.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusInitializing
		Expect(env.Client.Status().Update(ctx, rj)).To(Succeed())
		cluster := &rayv1.RayCluster{ObjectMeta: rayChild(rj, rj.Status.RayClusterName), Spec: *rj.Spec.RayClusterSpec.DeepCopy()}
		Expect(env.Client.Create(ctx, cluster)).To(Succeed())
		rayGV := rayv1.GroupVersion.String()
		Expect(env.Client.Create(ctx, podOf(cluster, rayGV, "RayCluster", &cluster.Spec.HeadGroupSpec.Template))).To(Succeed())
		Expect(env.Client.Create(ctx, podOf(cluster, rayGV, "RayCluster", &cluster.Spec.WorkerGroupSpecs[0].Template))).To(Succeed())
		submitter := &batchv1.Job{ObjectMeta: rayChild(rj, rj.Name), Spec: batchv1.JobSpec{Template: *rj.Spec.SubmitterPodTemplate.DeepCopy()}}
		Expect(env.Client.Create(ctx, submitter)).To(Succeed())
		Expect(submitter.Spec.Template.Labels).To(HaveKeyWithValue(berthv1.PodSetLabel, rayjob.SubmitterPodSet))
		Expect(env.Client.Create(ctx, podOf(submitter, "batch/v1", "Job", &submitter.Spec.Template))).To(Succeed())

		By("a tenant's RayCluster that only points its controller at the admitted RayJob gets no pod with berth's labels")
		// edit, with RayClusters aggregated to it as a platform that
		// installs KubeRay grants them (operatorEditor).
		tenant, err := env.Tenant(ctx, ns, "ray-forger", "edit")
		Expect(err).NotTo(HaveOccurred())
		forged := &rayv1.RayCluster{ObjectMeta: rayChild(rj, "train-forged"), Spec: *rj.Spec.RayClusterSpec.DeepCopy()}
		Expect(tenant.Create(ctx, forged)).To(Succeed())
		err = tenant.Create(ctx, podOf(forged, rayGV, "RayCluster", &forged.Spec.HeadGroupSpec.Template))
		Expect(err).To(MatchError(And(ContainSubstring(berthv1.WorkloadLabel), ContainSubstring(`RayCluster "train-forged", which berth does not queue`))))

		By("nor one named after the RayJob, the name of its submitter Job, not of its cluster")
		sameName := &rayv1.RayCluster{ObjectMeta: rayChild(rj, rj.Name), Spec: *rj.Spec.RayClusterSpec.DeepCopy()}
		Expect(tenant.Create(ctx, sameName)).To(Succeed())
		err = tenant.Create(ctx, podOf(sameName, rayGV, "RayCluster", &sameName.Spec.WorkerGroupSpecs[0].Template))
		Expect(err).To(MatchError(And(ContainSubstring(berthv1.WorkloadLabel), ContainSubstring(`RayCluster "train", which berth does not queue`))))

		By("labelled with the RayJob's queue, the tenant's look-alike is held and queued on its own")
		queued := &rayv1.RayCluster{ObjectMeta: rayChild(rj, "train-lookalike"), Spec: *rj.Spec.RayClusterSpec.DeepCopy()}
		queued.Labels[berthv1.QueueNameLabel] = "team"
		Expect(tenant.Create(ctx, queued)).To(Succeed())
		Expect(queued.Spec.Suspend).To(HaveValue(BeTrue()))
		Eventually(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, queued)
			return len(wls), err
		}, timeout, interval).Should(Equal(1))
	})
})
