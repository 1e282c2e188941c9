package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/setup"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/framework"
	"github.com/berth-dev/berth/test/jobsuite"
)

// The suite's plane has no JobSet CRD: berth starts managing JobSets, which
// it was told to, only when the CRD is installed, without a restart.
var _ = Describe("a job kind whose CRD is installed after berth started", Ordered, func() {
	BeforeAll(func() {
		late := berthOptions()
		late.Setup.Parts = append(late.Setup.Parts, setup.JobSet)
		late.Setup.KindPollInterval = 200 * time.Millisecond
		restartBerth(late)
	})

	It("queues and admits the kind's jobs once its CRD is served", func(ctx SpecContext) {
		crd, err := framework.JobSetCRD()
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(env.Plane.Config, envtest.CRDInstallOptions{Paths: []string{crd}})
		Expect(err).NotTo(HaveOccurred())

		ns := newNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.Flavor(ns, nil))).To(Succeed())
		Expect(env.Client.Create(ctx, builders.ClusterQueue(ns).Quota(ns, builders.GPU, "8", "").Obj())).To(Succeed())
		Expect(env.Client.Create(ctx, builders.LocalQueue(ns, "team", ns))).To(Succeed())
		js := &jobsetv1.JobSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train", Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
			Spec: jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "workers", Replicas: 2,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/train:latest",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{builders.GPU: resource.MustParse("4")}}}},
				}}}}}}},
		}
		Expect(env.Client.Create(ctx, js)).To(Succeed())
		Eventually(func(g Gomega) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, js)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wls).To(HaveLen(1), "the JobSet is queued as one Workload")
			g.Expect(wls[0].Status.Admission).NotTo(BeNil(), "and admitted")
			fresh := &jobsetv1.JobSet{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(js), fresh)).To(Succeed())
			g.Expect(fresh.Spec.Suspend).To(HaveValue(BeFalse()), "berth resumed it")
		}, timeout, interval).Should(Succeed())
	})
})
