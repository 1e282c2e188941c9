package kinds_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs/trainjob"
	"github.com/berth-dev/berth/test/builders"
	"github.com/berth-dev/berth/test/jobsuite"
)

// clusterRuntimeFor creates a ClusterTrainingRuntime of spec named after
// the spec's namespace (runtimes are cluster-scoped).
func clusterRuntimeFor(ctx context.Context, ns string, spec trainer.TrainingRuntimeSpec) string {
	rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: ns + "-torch"}, Spec: spec}
	Expect(env.Client.Create(ctx, rt)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, rt))).To(Succeed()) })
	return rt.Name
}

// newTrainJob is a queued TrainJob on ClusterTrainingRuntime runtime,
// numNodes nodes of gpus GPUs each.
func newTrainJob(ns, name, runtime string, numNodes int32, gpus string) *trainer.TrainJob {
	per := corev1.ResourceList{builders.GPU: resource.MustParse(gpus)}
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{berthv1.QueueNameLabel: "team"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: runtime},
			Trainer: &trainer.Trainer{NumNodes: ptr.To(numNodes), ResourcesPerNode: &corev1.ResourceRequirements{Requests: per, Limits: per}}},
	}
}

// ownPatch is berth's entry of tj's runtime patches, nil when there is none.
func ownPatch(tj *trainer.TrainJob) *trainer.RuntimePatch {
	for i := range tj.Spec.RuntimePatches {
		if tj.Spec.RuntimePatches[i].Manager == trainjob.Manager {
			return &tj.Spec.RuntimePatches[i]
		}
	}
	return nil
}

// runningTrainJob waits until berth admitted and resumed tj, playing the
// trainer, and returns the TrainJob, its JobSet and its Workload.
func runningTrainJob(ctx context.Context, tj *trainer.TrainJob) (*trainer.TrainJob, *jobsetv1.JobSet, *berthv1.Workload) {
	var js *jobsetv1.JobSet
	Eventually(func(g Gomega) {
		var err error
		tj, js, err = playTrainer(ctx, env.Client, client.ObjectKeyFromObject(tj))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tj.Spec.Suspend).To(HaveValue(BeFalse()))
		g.Expect(js.Spec.Suspend).To(HaveValue(BeFalse()))
	}, timeout, interval).Should(Succeed())
	wls, err := jobsuite.WorkloadsOf(ctx, env.Client, tj)
	Expect(err).NotTo(HaveOccurred())
	Expect(wls).To(HaveLen(1))
	return tj, js, &wls[0]
}

// jobOfJobSet is the Job the JobSet controller makes for js's replicated
// job rj at index 0.
func jobOfJobSet(js *jobsetv1.JobSet, rj string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: js.Namespace, Name: js.Name + "-" + rj + "-0",
			Labels: map[string]string{jobsetv1.JobSetNameKey: js.Name, jobsetv1.ReplicatedJobNameKey: rj, jobsetv1.JobIndexKey: "0"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: jobsetv1.SchemeGroupVersion.String(), Kind: "JobSet", Name: js.Name,
				UID: js.UID, Controller: ptr.To(true)}}},
		Spec: batchv1.JobSpec{Template: *js.Spec.ReplicatedJobs[0].Template.Spec.Template.DeepCopy()},
	}
}

var _ = Describe("TrainJob", func() {
	It("charges the JobSet its runtime makes, numNodes and resourcesPerNode overriding the trainer step, and places it through berth's runtime patch", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		rt := clusterRuntimeFor(ctx, ns, runtimeSpec(false))
		tj := newTrainJob(ns, "train", rt, 2, "4")
		Expect(env.Client.Create(ctx, tj)).To(Succeed())
		tj, js, wl := runningTrainJob(ctx, tj)

		By("the runtime's one node of 2 GPUs, as 2 nodes of 4")
		Expect(wl.Spec.PodSets).To(HaveLen(1))
		Expect(wl.Spec.PodSets[0].Name).To(Equal("node"))
		Expect(wl.Spec.PodSets[0].Count).To(BeEquivalentTo(2))
		Expect(wl.Spec.PodSets[0].Requests).To(HaveKeyWithValue(builders.GPU, resource.MustParse("4")))

		By("placed by berth's runtime patch, the last, which the trainer applies to the JobSet's pods")
		p := ownPatch(tj)
		Expect(p).NotTo(BeNil())
		Expect(tj.Spec.RuntimePatches[len(tj.Spec.RuntimePatches)-1].Manager).To(Equal(trainjob.Manager))
		Expect(p.TrainingRuntimeSpec.Template.Metadata.Labels).To(HaveKeyWithValue(berthv1.QueueNameLabel, "team"))
		Expect(js.Labels).To(HaveKeyWithValue(berthv1.QueueNameLabel, "team"))
		pods := js.Spec.ReplicatedJobs[0].Template.Spec.Template
		Expect(pods.Spec.NodeSelector).To(HaveKeyWithValue("example.com/pool", ns))
		Expect(pods.Labels).To(HaveKeyWithValue(berthv1.WorkloadLabel, string(wl.UID)))

		By("the JobSet is the TrainJob's: not queued on its own")
		Consistently(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, js)
			return len(wls), err
		}, 2*time.Second, interval).Should(BeZero())

		By("the pods of its Jobs, carrying berth's labels, are the TrainJob's gang")
		job := jobOfJobSet(js, "node")
		Expect(env.Client.Create(ctx, job)).To(Succeed())
		Expect(env.Client.Create(ctx, podOf(job, "batch/v1", "Job", &job.Spec.Template))).To(Succeed())
	})

	It("empties berth's runtime patch when the TrainJob is stopped, once the trainer reports it suspended", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		tj := newTrainJob(ns, "train", clusterRuntimeFor(ctx, ns, runtimeSpec(false)), 2, "2")
		Expect(env.Client.Create(ctx, tj)).To(Succeed())
		tj, _, wl := runningTrainJob(ctx, tj)
		Expect(ownPatch(tj).TrainingRuntimeSpec.Template.Spec.ReplicatedJobs).NotTo(BeEmpty())

		By("deactivating its Workload")
		Expect(env.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"active":false}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			got, _, err := playTrainer(ctx, env.Client, client.ObjectKeyFromObject(tj))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Spec.Suspend).To(HaveValue(BeTrue()))
			p := ownPatch(got)
			g.Expect(p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs).To(BeEmpty(), "berth's placement outlives the admission")
			g.Expect(p.TrainingRuntimeSpec.Template.Metadata.Labels).To(HaveKeyWithValue(berthv1.QueueNameLabel, "team"))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) *berthv1.Admission {
			got := &berthv1.Workload{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), got)).To(Succeed())
			return got.Status.Admission
		}, timeout, interval).Should(BeNil(), "the quota of a stopped TrainJob is released")
	})

	It("refuses a tenant's TrainJob berth cannot hold within quota, and a tenant's early resume, unlabelling, or taking away berth's patch", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "berth-it-"}}
		Expect(env.Client.Create(ctx, ns)).To(Succeed())
		// Held: the namespace's LocalQueue does not exist.
		tenant, err := env.Tenant(ctx, ns.Name, "trainer-user", "edit")
		Expect(err).NotTo(HaveOccurred())

		By("a TrainJob on a runtime that does not exist")
		missing := newTrainJob(ns.Name, "missing", ns.Name+"-nowhere", 1, "1")
		Expect(tenant.Create(ctx, missing)).To(MatchError(ContainSubstring(
			fmt.Sprintf(`the TrainJob's runtime, ClusterTrainingRuntime "%s-nowhere", does not exist`, ns.Name))))

		By("a TrainJob on a runtime of more replicated jobs than a Workload has pod sets")
		wide := runtimeSpec(false)
		for i := range 8 {
			extra := *wide.Template.Spec.ReplicatedJobs[0].DeepCopy()
			extra.Name, extra.Template.Labels = fmt.Sprintf("extra-%d", i), nil
			wide.Template.Spec.ReplicatedJobs = append(wide.Template.Spec.ReplicatedJobs, extra)
		}
		Expect(tenant.Create(ctx, newTrainJob(ns.Name, "wide", clusterRuntimeFor(ctx, ns.Name, wide), 1, "1"))).To(
			MatchError(ContainSubstring("runs 9 replicated jobs; berth admits at most 8 pod sets per gang")))

		By("a queued TrainJob is held, and stays held")
		rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "torch"}, Spec: runtimeSpec(false)}
		Expect(env.Client.Create(ctx, rt)).To(Succeed())
		tj := newTrainJob(ns.Name, "train", rt.Name, 2, "2")
		tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
		Expect(tenant.Create(ctx, tj)).To(Succeed())
		Expect(tj.Spec.Suspend).To(HaveValue(BeTrue()), "berth's defaulter holds a queued TrainJob at creation")
		Expect(ownPatch(tj)).NotTo(BeNil(), "berth's defaulter gives it berth's runtime patch")
		Eventually(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, tj)
			return len(wls), err
		}, timeout, interval).Should(Equal(1))
		edit := func(change func(*trainer.TrainJob)) error {
			got := &trainer.TrainJob{}
			Expect(tenant.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
			change(got)
			return tenant.Update(ctx, got)
		}
		Expect(edit(func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) })).To(MatchError(ContainSubstring("berth holds this job until its workload")))
		Expect(edit(func(tj *trainer.TrainJob) { delete(tj.Labels, berthv1.QueueNameLabel) })).To(
			MatchError(ContainSubstring("cannot be removed while berth holds workload")))
		Expect(edit(func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = nil })).To(MatchError(ContainSubstring("the entry of manager berth.dev/manager is berth's")))
		Consistently(func(g Gomega) bool {
			got := &trainer.TrainJob{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
			return ptr.Deref(got.Spec.Suspend, false)
		}, 2*time.Second, interval).Should(BeTrue())
	})

	It("keeps a tenant from running a JobSet as the TrainJob's outside its admission, or growing the TrainJob past it", func(ctx SpecContext) {
		ns := rayQueue(ctx)
		rt := clusterRuntimeFor(ctx, ns, runtimeSpec(false))
		// edit, with TrainJobs and JobSets aggregated to it as a platform
		// that installs Trainer and JobSet grants them (operatorEditor).
		tenant, err := env.Tenant(ctx, ns, "trainjob-forger", "edit")
		Expect(err).NotTo(HaveOccurred())

		By("a JobSet named as a TrainJob berth has not admitted, running, is refused")
		big := newTrainJob(ns, "big", rt, 5, "2") // 10 GPUs: never admitted on the queue's 8
		Expect(tenant.Create(ctx, big)).To(Succeed())
		Eventually(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, big)
			return len(wls), err
		}, timeout, interval).Should(Equal(1))
		early, err := trainerJobSet(ctx, env.Client, big)
		Expect(err).NotTo(HaveOccurred())
		early.Spec.Suspend = ptr.To(false)
		Expect(tenant.Create(ctx, early)).To(MatchError(ContainSubstring("this JobSet is TrainJob big's, which berth holds until its workload")))

		By("the admitted TrainJob's JobSet cannot grow")
		tj := newTrainJob(ns, "train", rt, 2, "2")
		Expect(tenant.Create(ctx, tj)).To(Succeed())
		tj, js, wl := runningTrainJob(ctx, tj)
		grown := js.DeepCopy()
		grown.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To[int32](4)
		grown.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To[int32](4)
		Expect(tenant.Patch(ctx, grown, client.MergeFrom(js))).To(MatchError(ContainSubstring(`TrainJob train is admitted with 2 pods in replicated job "node"`)))

		By("nor can the TrainJob: its trainer is immutable")
		Expect(tenant.Patch(ctx, tj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"trainer":{"numNodes":4}}}`)))).To(
			MatchError(ContainSubstring("field is immutable")))

		By("a look-alike JobSet under the TrainJob's controller reference is held and queued on its own")
		lookalike := js.DeepCopy()
		lookalike.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "train-lookalike", Labels: js.Labels, OwnerReferences: js.OwnerReferences}
		// 6 GPUs: more than the 4 the TrainJob leaves, so it stays held.
		lookalike.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To[int32](3)
		lookalike.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To[int32](3)
		Expect(tenant.Create(ctx, lookalike)).To(Succeed())
		Expect(lookalike.Spec.Suspend).To(HaveValue(BeTrue()))
		Eventually(func() (int, error) {
			wls, err := jobsuite.WorkloadsOf(ctx, env.Client, lookalike)
			return len(wls), err
		}, timeout, interval).Should(Equal(1))
		Consistently(func(g Gomega) *bool {
			got := &jobsetv1.JobSet{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lookalike), got)).To(Succeed())
			return got.Spec.Suspend
		}, 2*time.Second, interval).Should(HaveValue(BeTrue()))

		By("and the pods of its Jobs that copy the TrainJob's gang labels are refused")
		job := jobOfJobSet(lookalike, "node")
		Expect(tenant.Create(ctx, job)).To(Succeed())
		pod := podOf(job, "batch/v1", "Job", &job.Spec.Template)
		Expect(pod.Labels).To(HaveKeyWithValue(berthv1.WorkloadLabel, string(wl.UID)))
		Expect(tenant.Create(ctx, pod)).To(MatchError(And(ContainSubstring(berthv1.WorkloadLabel), ContainSubstring("is not admitted"))))
	})
})
